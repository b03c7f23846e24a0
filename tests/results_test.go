package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// seq 1 200000 through the built binary over stdio comes back within the result limit (the default, and one given
// with --result-limit), measured as the JSON of the whole result the client received, with what happened and
// where the whole output is in its first 2,000 characters: the part Claude Code shows the model of a result it
// keeps in a file.
func TestResultLimitEndToEnd(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		limit int
	}{{"default", nil, 40_000}, {"flag", []string{"--result-limit", "8192"}, 8192}} {
		t.Run(c.name, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("results")
			x.login(owner)
			s := x.startStdio(clientOpts{}, x.serveArgs(owner, "results", c.flags...)...)
			id := create(t, s.Client, map[string]any{"title": "results"})
			res := call(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 200000"})
			sent, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if len(sent) > c.limit {
				t.Fatalf("the result is %d bytes, over the limit of %d", len(sent), c.limit)
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
			if sent, _ := json.Marshal(page); len(sent) > c.limit {
				t.Fatalf("a page of the saved output is %d bytes", len(sent))
			}
			got := fields(t, page)
			if !strings.HasPrefix(str(got, "content"), "150000\n150001\n") || got["truncated"] != true {
				t.Fatalf("the saved output from line 150000: %.100q, truncated %v", str(got, "content"), got["truncated"])
			}
		})
	}
}
