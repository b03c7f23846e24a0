package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// sentSize is the size of a tool result as the server wrote it (image data left out), from what the client got.
func sentSize(t testing.TB, res *mcp.CallToolResult) int {
	t.Helper()
	n := resultSize(res)
	if n == 0 {
		t.Fatal("the result does not encode")
	}
	return n
}

// readPages reads a whole file with e2b_read_file, page after page.
func (s *session) readPages(t *testing.T, id, path string) string {
	t.Helper()
	var sb strings.Builder
	for offset := 1; ; {
		page := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": path, "offset": offset})
		sb.WriteString(page["content"].(string))
		if page["truncated"] != true {
			return sb.String()
		}
		if next := num(page["next_offset"]); next > offset {
			offset = next
		} else {
			t.Fatalf("%s: next_offset %d after offset %d", path, next, offset)
		}
	}
}

// wantUpFront checks that each of fields occurs as a key in the first 2,000 characters of the result's text, the
// part of a long result Claude Code shows the model when it keeps the rest in a file.
func wantUpFront(t *testing.T, res *mcp.CallToolResult, fields ...string) {
	t.Helper()
	text := resultText(res)
	head := string([]rune(text)[:min(2000, utf8.RuneCountInString(text))])
	for _, f := range fields {
		if !strings.Contains(head, `"`+f+`":`) {
			t.Errorf("%q is not in the first 2,000 characters of the result: %.300s...", f, head)
		}
	}
}

// The cost table is what encoding/json makes of every character, in the text content and in structuredContent:
// a result built from a string costs its fieldCost more than the same result with an empty string.
func TestFieldCostIsExact(t *testing.T) {
	t.Parallel()
	samples := []string{
		"plain", "line\n", "tab\there", `"quoted" \back\`, "<html> & </html>", "\x00\x01\x1f\x7f", "żółw 🐢",
		"\u2028\u2029", "bad \xff\xfe utf-8", "cut \xe2\x82", strings.Repeat("x\n", 1000), seqOutput(3000),
	}
	for c := range 128 {
		samples = append(samples, string(rune(c)))
	}
	empty := sizeOf(execResult{})
	for _, s := range samples {
		got := sizeOf(execResult{Stdout: s}) - empty
		if want := fieldCost([]byte(s)); got != want {
			t.Errorf("%q costs %d bytes of the result, fieldCost says %d", s, got, want)
		}
	}
}

func TestHeadAndTailWithin(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]string{
		"lines":      seqOutput(20000),
		"quotes":     strings.Repeat(`{"a": "<b>"}`+"\n", 3000),
		"multibyte":  strings.Repeat("żółw 🐢 ", 4000),
		"one line":   strings.Repeat("0123456789", 5000),
		"not utf-8":  strings.Repeat("\xff\x00ab", 5000),
		"separators": strings.Repeat("\u2028x", 8000),
	} {
		b := []byte(s)
		for _, room := range []int{0, 10, 500, 4096, 40000} {
			got, cut := headAndTail(b, b, int64(len(b)), int64(bytes.Count(b, []byte{'\n'})), room)
			if !cut {
				t.Fatalf("%s in %d: not cut", name, room)
			}
			if n := fieldCost([]byte(got)); n > max(room, markerCost) {
				t.Errorf("%s in %d: costs %d", name, room, n)
			}
			m := markerRE.FindStringIndex(got)
			if m == nil {
				if !strings.HasPrefix(got, "... [") {
					t.Fatalf("%s in %d: no marker: %q", name, room, got[:min(80, len(got))])
				}
				continue
			}
			head, tail := got[:m[0]], got[m[1]:]
			if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
				t.Errorf("%s in %d: not a head and a tail of the text", name, room)
			}
			if room >= 4096 && (len(head) == 0 || len(tail) == 0) {
				t.Errorf("%s in %d: head %d, tail %d bytes", name, room, len(head), len(tail))
			}
		}
	}
}

// A tool result that cannot be brought within the limit is refused with a note, and an error text is cut.
func TestSuccessAndFailureWithinLimit(t *testing.T) {
	t.Parallel()
	b := newBase(Deps{Config: Config{ResultLimit: MinResultLimit}})
	type list struct {
		Items []string `json:"items"`
	}
	res := b.success(t.Context(), "e2b_list_things", list{Items: strings.Split(strings.Repeat("item,", 2000), ",")})
	if !res.IsError || resultSize(res) > b.limit(t.Context()) {
		t.Fatalf("an oversized list: error %v, %d bytes", res.IsError, resultSize(res))
	}
	wantContains(t, resultText(res), "e2b_list_things", "over the result limit of 4096 for this client")

	res = b.failure(t.Context(), "E2B API error: "+strings.Repeat("no such thing \"x\"\n", 2000)+"the end")
	if !res.IsError || resultSize(res) > b.limit(t.Context()) {
		t.Fatalf("an oversized error: %d bytes", resultSize(res))
	}
	wantContains(t, resultText(res), "E2B API error: no such thing", "lines omitted", "the end")

	small := b.success(t.Context(), "e2b_list_things", list{Items: []string{"a"}})
	if raw, _ := json.Marshal(small.StructuredContent); small.IsError || string(raw) != `{"items":["a"]}` {
		t.Fatalf("a small result: %s", resultText(small))
	}
}

// seq 1 200000 comes back within the default limit, with what happened and where the whole output is in the first
// 2,000 characters, on the emulator and the real envd.
func TestExecSeqWithinDefaultLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 200000"})
		if n := sentSize(t, res); n > DefaultResultLimit {
			t.Fatalf("the result is %d bytes as sent, over the default limit of %d", n, DefaultResultLimit)
		}
		wantUpFront(t, res, "exit_code", "success", "error", "truncated", "total_lines", "stdout_file")
		out := mustOK(t, "e2b_exec", res)
		if out["truncated"] != true || num(out["total_lines"]) != 200000 || out["stdout_file"] != "/tmp/e2b-mcp/exec-1.stdout" {
			t.Fatalf("result %v %v %v", out["truncated"], out["total_lines"], out["stdout_file"])
		}
		stdout := out["stdout"].(string)
		full := seqOutput(200000)
		m := markerRE.FindStringIndex(stdout)
		if m == nil || !strings.HasPrefix(full, stdout[:m[0]+1]) || !strings.HasSuffix(full, stdout[m[1]:]) ||
			!strings.HasSuffix(stdout, "199999\n200000\n") || !strings.Contains(stdout, "\n1000\n") {
			t.Fatalf("stdout is not a head and tail of the output: %.200q", stdout)
		}
		// Most of the limit is used: the head and tail are not needlessly short.
		if n := sentSize(t, res); n < DefaultResultLimit*9/10 {
			t.Errorf("the result uses only %d of %d bytes", n, DefaultResultLimit)
		}
		// Output with more escaping fits too, and a stream that fits in half stays whole beside a cut one.
		res = s.call(t, "e2b_exec", map[string]any{"sandbox_id": id,
			"command": `for i in $(seq 1 20000); do printf '{"i": %d, "tag": "<b>\t&amp;"}\n' $i; done; echo small >&2`})
		if n := sentSize(t, res); n > DefaultResultLimit {
			t.Fatalf("escaped output: %d bytes as sent", n)
		}
		out = mustOK(t, "e2b_exec", res)
		if out["stderr"] != "small\n" || out["stderr_file"] != nil || out["truncated"] != true || out["stdout_file"] == nil {
			t.Fatalf("stderr %q, stderr_file %v, truncated %v", out["stderr"], out["stderr_file"], out["truncated"])
		}
	})
}

// Files of 230 KB and 2 MiB come back a page at a time within the default limit, with truncated and next_offset
// up front, and the pages put together are the file.
func TestReadFileWithinDefaultLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, `seq 1 100000 | sed 's/$/ "x"/' | head -c 230000 > mid.txt; head -c 2000000 /dev/urandom | base64 -w 100 | head -c 2097152 > big.txt`)
		for _, c := range []struct {
			path     string
			min, max int
		}{{"mid.txt", 230_000, 230_000}, {"big.txt", 2 << 20, 2 << 20}} {
			body, _, err := e.envdOf(t, "alice", id).Download(t.Context(), "/home/user/"+c.path, e2b.DownloadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			whole, err := io.ReadAll(body)
			body.Close()
			if err != nil {
				t.Fatal(err)
			}
			size := 0
			var got strings.Builder
			offset, pages := 1, 0
			for {
				args := map[string]any{"sandbox_id": id, "path": c.path}
				if offset > 1 {
					args["offset"] = offset
				}
				res := s.call(t, "e2b_read_file", args)
				if n := sentSize(t, res); n > DefaultResultLimit {
					t.Fatalf("%s from line %d: %d bytes as sent", c.path, offset, n)
				}
				page := mustOK(t, "e2b_read_file", res)
				size = num(page["size"])
				got.WriteString(page["content"].(string))
				pages++
				if page["truncated"] != true {
					break
				}
				wantUpFront(t, res, "path", "truncated", "next_offset")
				offset = num(page["next_offset"])
				if pages > 1000 {
					t.Fatal("no end to the pages")
				}
			}
			if size < c.min || size > c.max || got.String() != string(whole) || pages < 2 {
				t.Fatalf("%s: size %d, read %d bytes in %d pages", c.path, size, got.Len(), pages)
			}
			t.Logf("%s: %d bytes in %d pages", c.path, size, pages)
		}
	})
}

// A resource read stays within the limit too: a text file over it is refused with a pointer to e2b_read_file.
func TestResourceWithinLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	s.exec(t, id, "seq 1 30000 > /home/user/big.txt; seq 1 100 > /home/user/small.txt; mkdir many; cd many && touch $(seq -f 'file-with-a-long-name-%05g' 1 900)")
	srv := ResourceTemplates(e.deps)[0]
	read := func(p string) ([]mcp.ResourceContents, error) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = SandboxFileURI(id, p)
		req.Params.Arguments = map[string]any{"sandbox_id": id, "path": strings.TrimPrefix(p, "/")}
		return srv.Handler(WithCaller(t.Context(), s.caller), req)
	}
	if _, err := read("/home/user/big.txt"); err == nil || !strings.Contains(err.Error(), "e2b_read_file") {
		t.Fatalf("a text file over the limit: %v", err)
	}
	for _, p := range []string{"/home/user/small.txt", "/home/user/many"} {
		got, err := read(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		sent, _ := json.Marshal(mcp.ReadResourceResult{Contents: got})
		if len(sent) > DefaultResultLimit {
			t.Fatalf("%s: %d bytes as sent", p, len(sent))
		}
		if p == "/home/user/many" {
			wantContains(t, got[0].(mcp.TextResourceContents).Text, "more entries; list them with e2b_exec")
		}
	}
}

// BenchmarkExecAnswer: building the answer of an e2b_exec whose output fits (seq 1 2000 and a line of stderr), as
// run does it: the room of each stream, the output within it, and the check of the whole against the limit.
func BenchmarkExecAnswer(b *testing.B) {
	t := execTool{newBase(Deps{})}
	out, errOut := []byte(seqOutput(2000)), []byte("warning: x <y> & z\n")
	b.ReportAllocs()
	for b.Loop() {
		stdout, stderr := newCapture(t.limit(context.Background()), ""), newCapture(t.limit(context.Background()), "")
		stdout.write(out)
		stderr.write(errOut)
		res := execResult{SandboxID: "sbx", Cwd: "/home/user", TotalLines: stdout.lines() + stderr.lines()}
		res.ended(0, true, "")
		streams := [2]stream{{c: stdout, name: "stdout", text: &res.Stdout, file: &res.StdoutFile},
			{c: stderr, name: "stderr", text: &res.Stderr, file: &res.StderrFile}}
		probe := res
		probe.Truncated, probe.StdoutFile, probe.StderrFile = true, "/tmp/e2b-mcp/exec-1.stdout", "/tmp/e2b-mcp/exec-1.stderr"
		rooms := splitRoom(t.limit(context.Background())-sizeOf(probe), stdout, stderr)
		if !stdout.fits(rooms[0]) || !stderr.fits(rooms[1]) {
			b.Fatal("the output does not fit")
		}
		t.success(context.Background(), "e2b_exec", fitOutput(t.limit(context.Background()), &res, nil, streams))
	}
}

// encodeResult's size, worked out from the JSON, is what encoding the whole answer measures.
func TestEncodeResultSize(t *testing.T) {
	t.Parallel()
	link := fileLink("sbx", "/tmp/a <b>.txt", "a file & more")
	linked := readResult{Path: "/a&b", Content: strings.Repeat("\\\"\x01", 50)}
	linked.attach(link)
	image := readResult{Path: "x.png"}
	image.attach(mcp.NewImageContent("aGVsbG8=", "image/png"), link)
	for _, v := range []any{
		execResult{Stdout: seqOutput(100), Stderr: "<x> & \"y\"\t\u2028 żółw \xff", ExitCode: new(1), Success: new(false), Error: new("exit status 1")},
		linked,
		&image,
		map[string]any{"nested": map[string]any{"list": []string{"<", ">", "&"}}},
	} {
		res, got := encodeResult(v)
		if want := resultSize(res); got != want {
			t.Errorf("%T: size %d, encoding the answer measures %d", v, got, want)
		}
		if a, ok := v.(attached); ok && len(res.Content) != 1+len(a.attached()) {
			t.Errorf("%T: %d contents, want the JSON and its %d attachments", v, len(res.Content), len(a.attached()))
		}
	}
}
