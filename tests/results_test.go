package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// copySizes are the sizes of the two copies of a result a client may hand its model: the text content, and
// structuredContent's JSON.
func copySizes(t testing.TB, res *mcp.CallToolResult) (text, structured int) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += len(tc.Text)
		}
	}
	return text, len(raw)
}

// seq 1 200000 through the built binary over stdio comes back within the result limit (the default of a client
// the server does not know, one given with --result-limit, and Claude Code's by --client-profile), each copy of
// the result on its own, and using most of it: the limit is what the model reads, not the sum of the copies.
// What happened and where the whole output is are in its first 2,000 characters: the part Claude Code shows the
// model of a result it keeps in a file.
func TestResultLimitEndToEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		flags []string
		limit int
	}{
		{"default", nil, 18_000},
		{"flag", []string{"--result-limit", "8192"}, 8192},
		{"claude-code", []string{"--client-profile", "claude-code"}, 45_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("results")
			x.login(owner)
			s := x.startStdio(clientOpts{}, x.serveArgs(owner, "results", c.flags...)...)
			id := create(t, s.Client, map[string]any{"title": "results"})
			res := call(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 200000"})
			textSize, structured := copySizes(t, res)
			if textSize > c.limit || structured > c.limit {
				t.Fatalf("the result's copies are %d (text) and %d (structuredContent) bytes, over the limit of %d", textSize, structured, c.limit)
			}
			if textSize < c.limit*8/10 {
				t.Errorf("the text the model reads is %d bytes of a limit of %d: the limit is spent on the copies' sum", textSize, c.limit)
			}
			body := text(res)
			head := string([]rune(body)[:min(2000, utf8.RuneCountInString(body))])
			for _, want := range []string{`"exit_code":0`, `"truncated":true`, `"total_lines":200000`, `"stdout_file":"/tmp/e2b-mcp/exec-1.stdout"`} {
				if !strings.Contains(head, want) {
					t.Errorf("%s is not in the first 2,000 characters: %.400s", want, head)
				}
			}
			out := fields(t, res)
			stdout := str(out, "stdout")
			if !strings.HasPrefix(stdout, "1\n2\n3\n") || !strings.HasSuffix(stdout, "199999\n200000\n") || !strings.Contains(stdout, "lines omitted] ...") {
				t.Fatalf("stdout is not the head and tail of the output: %.200q", stdout)
			}
			// The whole output is where the result says, read a page at a time within the limit.
			page := call(t, s.Client, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/tmp/e2b-mcp/exec-1.stdout", "offset": 150000})
			if textSize, structured := copySizes(t, page); textSize > c.limit || structured > c.limit {
				t.Fatalf("a page of the saved output is %d (text) and %d (structuredContent) bytes", textSize, structured)
			}
			got := fields(t, page)
			if !strings.HasPrefix(str(got, "content"), "150000\n150001\n") || got["truncated"] != true {
				t.Fatalf("the saved output from line 150000: %.100q, truncated %v", str(got, "content"), got["truncated"])
			}
		})
	}
}
