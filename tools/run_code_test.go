package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// realCodeInterpreter starts E2B's real code-interpreter server from ../shared/code-interpreter (beside the
// repository) and returns its URL; it is stopped when t ends.
func realCodeInterpreter(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "shared", "code-interpreter"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "start.sh")); err != nil {
		optional.Skip(t, "E2B's code-interpreter server is not beside the repository (../shared/code-interpreter)")
	}
	probe := exec.Command("/usr/bin/python3", "-c", "import fastapi, uvicorn, httpx, websockets, jupyter_server, ipykernel, matplotlib, pandas")
	if out, err := probe.CombinedOutput(); err != nil {
		optional.Missing(t, "the code-interpreter server needs Debian's python3-fastapi python3-uvicorn python3-httpx "+
			"python3-websockets python3-jupyter-server python3-ipykernel python3-matplotlib python3-pandas: "+strings.TrimSpace(string(out)))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	run := t.TempDir()
	cmd := exec.Command(filepath.Join(dir, "start.sh"), fmt.Sprint(port))
	cmd.Env = append(os.Environ(), "CI_RUN="+run)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { _ = exec.Command(filepath.Join(dir, "stop.sh"), run).Run() })
	if err != nil {
		t.Fatalf("start.sh: %v\n%s", err, out)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// codeInterpreterEnv is an emulator behind a front that serves port 49999 of every sandbox from the real code
// interpreter, as E2B's edge serves that port of a code-interpreter sandbox; everything else goes to the
// emulator. tokens counts the requests for port 49999 that carried the sandbox's envd token.
type codeInterpreterEnv struct {
	*env
	front  *httptest.Server
	tokens atomic.Int64
}

func newCodeInterpreterEnv(t testing.TB) *codeInterpreterEnv {
	t.Helper()
	ci, err := url.Parse(realCodeInterpreter(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, e2btest.Options{Templates: []string{e2b.CodeInterpreterTemplate}})
	emu, err := url.Parse(e.emu.URL())
	if err != nil {
		t.Fatal(err)
	}
	ce := &codeInterpreterEnv{env: e}
	toCI, toEmu := httputil.NewSingleHostReverseProxy(ci), httputil.NewSingleHostReverseProxy(emu)
	toCI.FlushInterval = -1
	ce.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("E2b-Sandbox-Port") == fmt.Sprint(e2b.CodeInterpreterPort) {
			if r.Header.Get("X-Access-Token") != "" {
				ce.tokens.Add(1)
			}
			toCI.ServeHTTP(w, r)
			return
		}
		toEmu.ServeHTTP(w, r)
	}))
	t.Cleanup(ce.front.Close)
	e.deps.Clients = frontClients{api: e.emu.URL(), sandbox: ce.front.URL}
	return ce
}

// frontClients is keyedClients with the sandboxes reached through the front.
type frontClients struct{ api, sandbox string }

func (f frontClients) Client(_ context.Context, owner string) (*e2b.Client, error) {
	key := map[string]string{"alice": aliceKey, "bob": bobKey}[owner]
	return e2b.NewClient(e2b.Config{APIKey: key, APIURL: f.api, SandboxURL: f.sandbox, MaxRetries: -1})
}

// emulatedCodeInterpreterEnv is the local backend's form: the emulator runs its own code-interpreter server in
// each sandbox of the template.
func emulatedCodeInterpreterEnv(t testing.TB, configure ...func(*Config)) *env {
	t.Helper()
	if err := emulator.CodeInterpreterAvailable(); err != nil {
		optional.Missing(t, err.Error())
	}
	return newEnvWith(t, e2btest.Options{CodeInterpreter: true}, configure...)
}

// The same assertions against E2B's real code-interpreter server and the emulator's.
func TestRunCode(t *testing.T) {
	t.Parallel()
	t.Run("real", func(t *testing.T) {
		e := newCodeInterpreterEnv(t)
		testRunCode(t, e.env, func() int64 { return e.tokens.Load() })
	})
	t.Run("emulated", func(t *testing.T) {
		e := emulatedCodeInterpreterEnv(t)
		testRunCode(t, e, func() int64 {
			var n int64
			for _, r := range e.emu.Requests() {
				if r.Header.Get("E2b-Sandbox-Port") == fmt.Sprint(e2b.CodeInterpreterPort) && r.Header.Get("X-Access-Token") != "" {
					n++
				}
			}
			return n
		})
	})
}

// testRunCode runs the assertions; tokens counts the requests to port 49999 that carried the envd token.
func testRunCode(t *testing.T, e *env, tokens func() int64) {
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"template": e2b.CodeInterpreterTemplate})
	run := func(t *testing.T, args map[string]any) map[string]any {
		t.Helper()
		args["sandbox_id"] = id
		return s.ok(t, runCodeName, args)
	}
	mainText := func(t *testing.T, res map[string]any) string {
		t.Helper()
		for _, r := range res["results"].([]any) {
			if m := r.(map[string]any); m["is_main_result"] == true {
				return fmt.Sprint(m["text"])
			}
		}
		t.Fatalf("no main result in %v", res)
		return ""
	}

	t.Run("state lives between calls", func(t *testing.T) {
		run(t, map[string]any{"code": "x = 21"})
		res := run(t, map[string]any{"code": "x * 2"})
		if got := mainText(t, res); got != "42" || res["success"] != true {
			t.Fatalf("x * 2 = %q: %v", got, res)
		}
		if tokens() == 0 {
			t.Fatal("no request to port 49999 carried the envd access token")
		}
	})

	t.Run("a matplotlib chart is image content", func(t *testing.T) {
		res := s.call(t, runCodeName, map[string]any{"sandbox_id": id,
			"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6])\nplt.title('t')\nplt.show()"})
		mustOK(t, runCodeName, res)
		var imgs int
		for _, c := range res.Content {
			ic, ok := c.(mcp.ImageContent)
			if !ok {
				continue
			}
			imgs++
			data, err := base64.StdEncoding.DecodeString(ic.Data)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(bytes.NewReader(data)); err != nil || ic.MIMEType != imagesafe.PNG {
				t.Fatalf("image content %s does not decode as PNG: %v", ic.MIMEType, err)
			}
		}
		if imgs != 1 {
			t.Fatalf("%d images, want 1: %s", imgs, resultText(res))
		}
		wantContains(t, resultText(res), `"png"`, `"mime_type":"image/png"`)
	})

	t.Run("a DataFrame is a readable table", func(t *testing.T) {
		res := run(t, map[string]any{"code": "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})"})
		if got := mainText(t, res); got != "   a  b\n0  1  x\n1  2  y" {
			t.Fatalf("DataFrame text %q", got)
		}
		res = run(t, map[string]any{"code": "from IPython.display import HTML\nHTML('<table><tr><th>k</th><th>v</th></tr><tr><td>a&amp;b</td><td>1</td></tr></table>')"})
		r := res["results"].([]any)[0].(map[string]any)
		if r["html_text"] != "k | v\na&b | 1" {
			t.Fatalf("HTML table as text: %q", r["html_text"])
		}
	})

	t.Run("an exception has its name and traceback", func(t *testing.T) {
		res := run(t, map[string]any{"code": "print('before')\n1/0"})
		errv, _ := res["error"].(map[string]any)
		if res["success"] != false || errv["name"] != "ZeroDivisionError" || errv["value"] != "division by zero" ||
			!strings.Contains(fmt.Sprint(errv["traceback"]), "1/0") || res["stdout"] != "before\n" {
			t.Fatalf("1/0: %v", res)
		}
		// As IPython prints it: the header on a line of its own, the frame after it.
		if tb := fmt.Sprint(errv["traceback"]); !regexp.MustCompile(`(?m)^-+\nZeroDivisionError +Traceback \(most recent call last\)\n`).MatchString(tb) {
			t.Fatalf("traceback without its line breaks: %q", tb)
		}
	})

	t.Run("print streams as progress", func(t *testing.T) {
		res := s.callCtx(context.Background(), t, runCodeName, map[string]any{"sandbox_id": id,
			"code": "import time\nprint('one', flush=True)\ntime.sleep(1)\nprint('two')"}, &mcp.Meta{ProgressToken: "ci-1"})
		mustOK(t, runCodeName, res)
		var msgs []string
		waitfor.Until(t, 30*time.Second, "both lines as progress", func() bool {
			msgs = msgs[:0]
			for _, p := range s.progress() {
				if p["progressToken"] == "ci-1" {
					msgs = append(msgs, fmt.Sprint(p["message"]))
				}
			}
			return strings.Join(msgs, "") == "one\ntwo\n"
		})
		if len(msgs) < 2 {
			t.Fatalf("progress messages %q: want the lines as they were printed", msgs)
		}
	})

	t.Run("contexts keep their own state", func(t *testing.T) {
		created := s.ok(t, codeContextName, map[string]any{"sandbox_id": id, "action": "create", "cwd": "/tmp"})
		ctxID := created["context"].(map[string]any)["id"].(string)
		res := run(t, map[string]any{"code": "x", "context_id": ctxID})
		if errv, _ := res["error"].(map[string]any); errv["name"] != "NameError" {
			t.Fatalf("x in a new context: %v", res)
		}
		run(t, map[string]any{"code": "y = 5", "context_id": ctxID})
		list := s.ok(t, codeContextName, map[string]any{"sandbox_id": id, "action": "list"})
		wantContains(t, fmt.Sprint(list["contexts"]), ctxID, "/tmp", "/home/user")
		s.ok(t, codeContextName, map[string]any{"sandbox_id": id, "action": "restart", "context_id": ctxID})
		res = run(t, map[string]any{"code": "y", "context_id": ctxID})
		if errv, _ := res["error"].(map[string]any); errv["name"] != "NameError" || num(res["execution_count"]) != 1 {
			t.Fatalf("y after a restart: %v", res)
		}
		s.ok(t, codeContextName, map[string]any{"sandbox_id": id, "action": "remove", "context_id": ctxID})
		wantContains(t, s.fail(t, runCodeName, map[string]any{"sandbox_id": id, "code": "1", "context_id": ctxID}),
			"Context '"+ctxID+"' not found", "e2b_code_context action list")
	})

	t.Run("timeout_ms interrupts the kernel", func(t *testing.T) {
		start := time.Now()
		res := run(t, map[string]any{"code": "while True: pass", "timeout_ms": 2000})
		took := time.Since(start)
		if res["timed_out"] != true || res["success"] != false {
			t.Fatalf("while True with timeout_ms 2000: %v after %v", res, took)
		}
		t.Logf("interrupted after %v", took)
		res = run(t, map[string]any{"code": "x + 1"})
		if got := mainText(t, res); got != "22" {
			t.Fatalf("after the interrupt, x + 1 = %q: %v", got, res)
		}
	})

	t.Run("a cancelled call interrupts the kernel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req := mcp.CallToolRequest{}
			req.Params.Name = runCodeName
			req.Params.Arguments = map[string]any{"sandbox_id": id, "code": "print('looping', flush=True)\nwhile True: pass"}
			req.Params.Meta = &mcp.Meta{ProgressToken: "ci-cancel"}
			_, _ = s.c.CallTool(ctx, req)
		}()
		waitfor.Until(t, 30*time.Second, "the loop to start", func() bool {
			for _, p := range s.progress() {
				if p["progressToken"] == "ci-cancel" {
					return true
				}
			}
			return false
		})
		cancel()
		waitfor.Recv(t, done, 30*time.Second, "the cancelled call to end")
		res := run(t, map[string]any{"code": "x + 2"})
		if got := mainText(t, res); got != "23" {
			t.Fatalf("after the cancellation, x + 2 = %q: %v", got, res)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		wantContains(t, s.fail(t, runCodeName, map[string]any{"sandbox_id": id}), "Missing required parameter: code")
		wantContains(t, s.fail(t, runCodeName, map[string]any{"sandbox_id": id, "code": "1", "language": "python", "context_id": "c"}), "not both")
		wantContains(t, s.fail(t, codeContextName, map[string]any{"sandbox_id": id, "action": "restart"}), "Missing required parameter: context_id")
		wantContains(t, s.fail(t, codeContextName, map[string]any{"sandbox_id": id, "action": "create", "language": "javascript"}),
			"could not start a context for language 'javascript'", "Failed to create context")
	})
}

// A sandbox of another template has nothing on port 49999: the error says which template to use.
func TestRunCodeNeedsTheTemplate(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, map[string]any{})
		s.exec(t, id, "true") // the sandbox's network is up, and nothing listens on 49999
		wantContains(t, s.fail(t, runCodeName, map[string]any{"sandbox_id": id, "code": "1"}),
			"runs no code interpreter", e2b.CodeInterpreterTemplate)
	})
}

func TestHTMLText(t *testing.T) {
	t.Parallel()
	got := htmlText("<div><style>td {x}</style><table>\n<thead><tr><th></th><th>a</th></tr></thead>" +
		"<tbody><tr><th>0</th><td>1 &lt; 2</td></tr></tbody></table></div>")
	if got != "| a\n0 | 1 < 2" {
		t.Fatalf("%q", got)
	}
}

// noLinks is a Previews that the test never asks for a link: with it, sandboxes are made with public traffic off.
type noLinks struct{}

func (noLinks) Link(string, string, int, time.Duration) (string, time.Time, error) {
	return "", time.Time{}, fmt.Errorf("no links here")
}

// A sandbox with public traffic off answers port 49999 only with its traffic token, which the call gets from
// E2B's connect; the token is never in the result.
func TestRunCodePrivateTraffic(t *testing.T) {
	t.Parallel()
	e := emulatedCodeInterpreterEnv(t)
	e.deps.Previews = noLinks{}
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"template": e2b.CodeInterpreterTemplate})
	res := s.call(t, runCodeName, map[string]any{"sandbox_id": id, "code": "6 * 7"})
	out := mustOK(t, runCodeName, res)
	if r := out["results"].([]any)[0].(map[string]any); r["text"] != "42" {
		t.Fatalf("6 * 7: %v", out)
	}
	var token string
	for _, r := range e.emu.Requests() {
		if v := r.Header.Get(e2b.TrafficTokenHeader); v != "" {
			token = v
		}
	}
	if token == "" {
		t.Fatal("no request carried the traffic token")
	}
	if strings.Contains(resultText(res), token) {
		t.Fatal("the traffic token is in the result")
	}
}

// Output and results far over the result limit are cut to their head and tail, and the result stays within it.
func TestRunCodeWithinTheResultLimit(t *testing.T) {
	t.Parallel()
	e := emulatedCodeInterpreterEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"template": e2b.CodeInterpreterTemplate})
	res := s.call(t, runCodeName, map[string]any{"sandbox_id": id,
		"code": "print('<a>' * 50000)\nimport sys\nprint('e' * 30000, file=sys.stderr)\n'r' * 100000"})
	out := mustOK(t, runCodeName, res)
	if out["truncated"] != true {
		t.Fatalf("not truncated: %.300v", out)
	}
	if n := resultSize(res); n > DefaultResultLimit {
		t.Fatalf("result of %d bytes, over the limit %d", n, DefaultResultLimit)
	}
	wantContains(t, fmt.Sprint(out["stdout"]), "<a><a>", "omitted")
	wantContains(t, fmt.Sprint(out["results"]), "rrrr", "omitted")
}

// BenchmarkRunCode is one e2b_run_code call of a cell with a value, through the MCP server, on each backend.
func BenchmarkRunCode(b *testing.B) {
	for _, backend := range []string{"real", "emulated"} {
		b.Run(backend, func(b *testing.B) {
			var e *env
			if backend == "real" {
				e = newCodeInterpreterEnv(b).env
			} else {
				e = emulatedCodeInterpreterEnv(b)
			}
			s := e.connect(b, eras[0], Caller{Owner: "alice", Session: "main"})
			id := s.ok(b, "e2b_create_sandbox", map[string]any{"template": e2b.CodeInterpreterTemplate})["sandbox_id"]
			s.ok(b, runCodeName, map[string]any{"sandbox_id": id, "code": "1"})
			b.ResetTimer()
			for range b.N {
				s.ok(b, runCodeName, map[string]any{"sandbox_id": id, "code": "6 * 7"})
			}
		})
	}
}

// A cell is a step of the checkpoint policy, as a command is.
func TestRunCodeIsAStep(t *testing.T) {
	t.Parallel()
	e := emulatedCodeInterpreterEnv(t, func(c *Config) { c.Checkpoints = state.CheckpointPolicy{EverySteps: 2} })
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"template": e2b.CodeInterpreterTemplate})
	if out := s.ok(t, runCodeName, map[string]any{"sandbox_id": id, "code": "x = 1"}); out["checkpoint_id"] != nil {
		t.Fatalf("a checkpoint after step 1 of every 2: %v", out)
	}
	if out := s.ok(t, runCodeName, map[string]any{"sandbox_id": id, "code": "x"}); out["checkpoint_id"] == nil {
		t.Fatalf("no checkpoint after step 2 of every 2: %v", out)
	}
	out := s.ok(t, runCodeName, map[string]any{"sandbox_id": id, "code": "x + 1"})
	if r, _ := out["results"].([]any); len(r) != 1 || r[0].(map[string]any)["text"] != "2" {
		t.Fatalf("the kernel after the checkpoint: %v", out)
	}
}

// The images of one result share the image limit: those past it are named, not shown.
func TestRunCodeImagesShareTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 48 << 10
	e := emulatedCodeInterpreterEnv(t, func(c *Config) { c.ImageLimitBytes = limit })
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"template": e2b.CodeInterpreterTemplate})
	res := s.call(t, runCodeName, map[string]any{"sandbox_id": id, "code": "import matplotlib.pyplot as plt\n" +
		"for i in range(4):\n    plt.plot(range(50), [j * j * (i + 1) for j in range(50)])\n    plt.show()"})
	out := mustOK(t, runCodeName, res)
	total, shown := 0, 0
	for _, c := range res.Content {
		if ic, ok := c.(mcp.ImageContent); ok {
			data, _ := base64.StdEncoding.DecodeString(ic.Data)
			total += len(data)
			shown++
		}
	}
	results := out["results"].([]any)
	if len(results) != 4 || shown == 0 || shown == 4 || total > limit {
		t.Fatalf("%d of %d images shown, %d bytes (limit %d): %v", shown, len(results), total, limit, out)
	}
	wantContains(t, fmt.Sprint(results[3]), "not shown")
}

// Port 49999 answers as the sandbox's code lets it: one value far over what a result can show (here a 5 MB
// repr, one line of the server's stream) is left out, not held, and the answer says so; the rest of the cell's
// answer still comes.
func TestRunCodeLeavesOutAHugeLine(t *testing.T) {
	t.Parallel()
	e := emulatedCodeInterpreterEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"template": e2b.CodeInterpreterTemplate})
	out := mustOK(t, runCodeName, s.call(t, runCodeName, map[string]any{"sandbox_id": id, "code": "print('before')\n'x' * 5_000_000"}))
	if out["success"] != true || !strings.Contains(fmt.Sprint(out["stdout"]), "before") {
		t.Fatalf("the cell's answer: %.300v", out)
	}
	wantContains(t, fmt.Sprint(out["warning"]), "1 of the code interpreter's answers were over the", "left out")
}

// A chart is named by what E2B's code interpreter read of the figure, where it read anything.
func TestDescribeChart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ chart, want string }{
		{`{"type":"line","title":"Squares","x_label":"n","y_label":"n²","elements":[]}`,
			`A line chart titled "Squares" (x: "n", y: "n²") (PNG image)`},
		{`{"type":"bar","elements":[]}`, `A bar chart (PNG image)`},
		{``, `A chart (PNG image)`},
		{`[1,2]`, `A chart (PNG image)`},
	} {
		if got := describeChart([]byte(tc.chart), "png"); got != tc.want {
			t.Errorf("chart %s: %q, want %q", tc.chart, got, tc.want)
		}
	}
}
