package tools

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func links(res *mcp.CallToolResult) []mcp.ResourceLink {
	var out []mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(mcp.ResourceLink); ok {
			out = append(out, l)
		}
	}
	return out
}

// Results that name files in the sandbox link them as resources, so a client can open them directly.
func TestResultLinks(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 3000; seq 1 2000 >&2"})
		fields := mustOK(t, "e2b_exec", res)
		ls := links(res)
		if len(ls) != 2 || ls[0].URI != SandboxFileURI(id, fields["stdout_file"].(string)) ||
			ls[1].URI != SandboxFileURI(id, fields["stderr_file"].(string)) || ls[0].MIMEType == "" {
			t.Fatalf("links of a truncated exec: %+v (fields %v)", ls, fields)
		}
		if res := s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo short"}); len(links(res)) != 0 {
			t.Fatalf("an exec that kept all its output links files: %+v", res.Content)
		}
		res = s.call(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "/tmp/x y.md", "content": "# hi\n"})
		if ls := links(res); len(ls) != 1 || ls[0].URI != "e2b://sandbox/"+id+"/tmp/x%20y.md" || ls[0].Name != "x y.md" {
			t.Fatalf("write link: %+v", ls)
		}
		// A background command's log, in its start answer and in the process list.
		res = s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo started; sleep 60", "background": true})
		fields = mustOK(t, "e2b_exec", res)
		logURI := SandboxFileURI(id, fields["log_file"].(string))
		if ls := links(res); len(ls) != 1 || ls[0].URI != logURI {
			t.Fatalf("background exec links %+v, want its log %s", ls, logURI)
		}
		res = s.call(t, "e2b_list_processes", map[string]any{"sandbox_id": id})
		if ls := links(res); len(ls) != 1 || ls[0].URI != logURI {
			t.Fatalf("process list links %+v, want %s", ls, logURI)
		}
		s.ok(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": fields["pid"]})
	}, func(c *Config) { c.ResultLimit = MinResultLimit })
}

func TestSandboxFileURIRoundTrip(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/home/user/a.txt", "/tmp/with space/ü.png", "/home/user/100%.csv", "/x/#hash?q"} {
		uri := SandboxFileURI("sbx1", p)
		tpl := mcp.NewResourceTemplate(SandboxFileTemplate, "t").URITemplate
		if !tpl.Regexp().MatchString(uri) {
			t.Fatalf("%s does not match the template", uri)
		}
		vars := tpl.Match(uri)
		if vars == nil {
			t.Fatalf("%s does not match the template", uri)
		}
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		req.Params.Arguments = map[string]any{"sandbox_id": vars.Get("sandbox_id").String(), "path": vars.Get("path").String()}
		id, got, err := ResourceTarget(req)
		if err != nil || id != "sbx1" || got != p {
			t.Errorf("%s → %s %q %v, want %q", uri, id, got, err, p)
		}
	}
}
