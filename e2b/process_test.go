package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Wire tests of the process service against a fake envd: the exact requests E2B's SDKs send.

func TestRunCommandWire(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeFrames(w,
			frame(0, `{"event":{"start":{"pid":512}}}`),
			frame(0, `{"event":{"data":{"stdout":"aGkK"}}}`),
			frame(0, `{"event":{"keepalive":{}}}`),
			frame(0, `{"event":{"data":{"stderr":"ZXJyCg=="}}}`),
			frame(0, `{"event":{"end":{"exitCode":1,"exited":true,"status":"exit status 1","error":"exit status 1"}}}`),
			frame(2, `{}`))
	})
	var started uint32
	var out []string
	res, err := f.envd(t, "0.6.13").RunCommand(context.Background(), "echo hi", CommandOptions{
		Timeout:  60 * time.Second,
		OnStart:  func(pid uint32) { started = pid },
		OnOutput: func(k EventKind, d []byte) { out = append(out, k.String()+":"+string(d)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	// A fake envd sends no exit marker: the end is envd's.
	want := CommandResult{PID: 512, ProcessEnd: ProcessEnd{ExitCode: 1, Exited: true, Status: "exit status 1", Error: "exit status 1"}, Unmarked: true}
	if res != want || started != 512 || strings.Join(out, "|") != "stdout:hi\n|stderr:err\n" {
		t.Fatalf("result %+v started %d output %q", res, started, out)
	}
	r := f.last(t)
	if r.method != http.MethodPost || r.path != "/process.Process/Start" {
		t.Fatalf("request %s %s", r.method, r.path)
	}
	wantHeaders := map[string]string{
		"Content-Type":             "application/connect+json",
		"Connect-Protocol-Version": "1",
		"Connect-Content-Encoding": "identity",
		"Keepalive-Ping-Interval":  "50",
		// the command's timeout is the client's to enforce on the whole tree; envd's deadline is a last resort
		"Connect-Timeout-Ms": "80000",
	}
	for k, v := range wantHeaders {
		if got := r.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	var req struct {
		Process struct {
			Cmd  string   `json:"cmd"`
			Args []string `json:"args"`
		} `json:"process"`
		Stdin *bool `json:"stdin"`
	}
	if len(r.body) < 5 || json.Unmarshal(r.body[5:], &req) != nil {
		t.Fatalf("body %q", r.body)
	}
	a := req.Process.Args
	if req.Process.Cmd != "setsid" || len(a) != 9 || a[0] != "/bin/bash" || a[1] != "-l" || a[2] != "-c" || a[3] != commandShell ||
		a[5] != "echo hi" || !strings.HasPrefix(a[6], "\x1ee2b-mcp-exit-") || a[7] != "" || a[8] != commandExit || req.Stdin == nil || *req.Stdin {
		t.Fatalf("request %+v", req)
	}
}

// answerKillTree answers the short command SignalTree runs (reporting the group killed) and SendSignal, and
// tells kills about each.
func answerKillTree(w http.ResponseWriter, r *http.Request, body []byte, kills chan<- string) bool {
	switch {
	case r.URL.Path == "/process.Process/SendSignal":
		kills <- "SendSignal " + string(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
		return true
	case bytes.Contains(body, []byte("kill -KILL")):
		var req struct {
			Process struct{ Args []string } `json:"process"`
		}
		_ = json.Unmarshal(body[5:], &req)
		kills <- "tree " + strings.Join(req.Process.Args[3:], " ")
		writeFrames(w, frame(0, `{"event":{"start":{"pid":9}}}`), frame(0, `{"event":{"data":{"stdout":"S0lMTAo="}}}`),
			frame(0, `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`), frame(2, `{}`))
		return true
	}
	return false
}

func TestStartWire(t *testing.T) {
	f := newFakeEnvd(t, answerAll)
	_, err := f.envd(t, "0.6.13").Start(context.Background(), StartOptions{
		Process:           ProcessConfig{Cmd: "python3", Args: []string{"-m", "http.server"}, Envs: map[string]string{"B": "2", "A": "1"}, Cwd: "/srv"},
		Stdin:             true,
		Tag:               "web",
		KeepaliveInterval: 5 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	wantBody := frame(0, `{"process":{"cmd":"python3","args":["-m","http.server"],"envs":{"A":"1","B":"2"},"cwd":"/srv"},"tag":"web","stdin":true}`)
	if !bytes.Equal(r.body, wantBody) {
		t.Fatalf("body %q\nwant %q", r.body, wantBody)
	}
	if r.header.Get("Keepalive-Ping-Interval") != "5" || r.header.Get("Connect-Timeout-Ms") != "" {
		t.Fatalf("headers %v", r.header)
	}

	// A terminal goes in field 2, between the process and the tag.
	if _, err := f.envd(t, "0.6.13").Start(context.Background(), StartOptions{
		Process: ProcessConfig{Cmd: "/bin/bash"}, PTY: &PTYSize{Cols: 120, Rows: 40}, Tag: "tty",
	}, nil); err != nil {
		t.Fatal(err)
	}
	if r, want := f.last(t), frame(0, `{"process":{"cmd":"/bin/bash"},"pty":{"size":{"cols":120,"rows":40}},"tag":"tty","stdin":false}`); !bytes.Equal(r.body, want) {
		t.Fatalf("body %q\nwant %q", r.body, want)
	}
}

func TestStartDeliversEventsAsTheyArrive(t *testing.T) {
	gotStart := make(chan struct{})
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeFrames(w, frame(0, `{"event":{"start":{"pid":9}}}`))
		select {
		case <-gotStart:
		case <-time.After(10 * time.Second):
			return // the client never saw the start: the test fails below
		}
		_, _ = w.Write(append(frame(0, `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`), frame(2, `{}`)...))
	})
	var kinds []EventKind
	end, err := f.envd(t, "0.6.13").Start(context.Background(), StartOptions{Process: ProcessConfig{Cmd: "x"}}, func(ev ProcessEvent) {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == EventStart {
			close(gotStart)
		}
	})
	if err != nil || !end.Exited || len(kinds) != 2 || kinds[0] != EventStart || kinds[1] != EventEnd {
		t.Fatalf("end %+v err %v events %v", end, err, kinds)
	}
}

func TestStartStreamFailures(t *testing.T) {
	tests := []struct {
		name   string
		frames [][]byte
		check  func(t *testing.T, err error)
	}{
		{
			name:   "error at the end of a 200 stream",
			frames: [][]byte{frame(2, `{"error":{"code":"invalid_argument","message":"cwd '/nope' does not exist"}}`)},
			check: func(t *testing.T, err error) {
				var apiErr *APIError
				if !errors.As(err, &apiErr) || *apiErr != (APIError{Op: "envd Start", Status: 400, Code: "invalid_argument", Message: "cwd '/nope' does not exist", SandboxID: "sbx1"}) {
					t.Fatalf("err = %#v", err)
				}
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatal("not ErrInvalidArgument")
				}
			},
		},
		{
			name:   "unknown user",
			frames: [][]byte{frame(2, `{"error":{"code":"unauthenticated","message":"invalid username: 'nobodyx'"}}`)},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "401 unauthenticated") {
					t.Fatalf("err = %v", err)
				}
			},
		},
		{
			name:   "cut before the end-of-stream message",
			frames: [][]byte{frame(0, `{"event":{"start":{"pid":1}}}`)},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrStreamCut) || !errors.Is(err, errStreamCut) || errors.Is(err, ErrNoAnswer) {
					t.Fatalf("err = %v (%T), want a transport error for the cut stream", err, err)
				}
			},
		},
		{
			name:   "end of stream without the end event",
			frames: [][]byte{frame(0, `{"event":{"start":{"pid":1}}}`), frame(2, `{}`)},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrStreamCut) || !strings.Contains(err.Error(), "without the process's end event") {
					t.Fatalf("err = %v", err)
				}
			},
		},
		{
			name:   "malformed event",
			frames: [][]byte{frame(0, `{"event":{"data":{"stdout":"*"}}}`), frame(2, `{}`)},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrBadAnswer) || !strings.Contains(err.Error(), "malformed process event") || errors.Is(err, ErrNoAnswer) {
					t.Fatalf("err = %v (%T)", err, err)
				}
			},
		},
		{
			name:   "compressed message",
			frames: [][]byte{frame(1, `xx`)},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrBadAnswer) || err.Error() != "e2b: envd Start: unexpected answer from envd: connect: compressed message, but the request asked for identity encoding" || errors.Is(err, ErrNoAnswer) {
					t.Fatalf("err = %v (%T)", err, err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { writeFrames(w, tt.frames...) })
			_, err := f.envd(t, "0.6.13").Start(context.Background(), StartOptions{Process: ProcessConfig{Cmd: "x"}}, nil)
			tt.check(t, err)
		})
	}
}

func TestStartRefusesAnAnswerThatIsNotAStream(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>hello</html>"))
	})
	_, err := f.envd(t, "0.6.13").Start(context.Background(), StartOptions{Process: ProcessConfig{Cmd: "x"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `content type "text/html"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRunCommandCancelledKillsTheTree(t *testing.T) {
	kills := make(chan string, 4)
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if answerKillTree(w, r, body, kills) {
			return
		}
		writeFrames(w, frame(0, `{"event":{"start":{"pid":77}}}`))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := f.envd(t, "0.6.13").RunCommand(ctx, "sleep 100", CommandOptions{OnStart: func(uint32) { cancel() }})
	if !errors.Is(err, context.Canceled) || res.PID != 77 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if got := waitfor.Recv(t, kills, 30*time.Second, "the kill of the process group"); got != "tree 77 0" {
		t.Fatalf("first kill %q, want the process group of 77", got)
	}
	if got := waitfor.Recv(t, kills, 30*time.Second, "the SendSignal of the pid"); got != `SendSignal {"process":{"pid":77},"signal":"SIGNAL_SIGKILL"}` {
		t.Fatalf("then %q", got)
	}
}

func TestRunCommandTimedOut(t *testing.T) {
	killed := frame(0, `{"event":{"end":{"exitCode":-1,"status":"signal: killed","error":"signal: killed"}}}`)
	tests := []struct {
		name    string
		frames  [][]byte
		timeout time.Duration
		want    bool
	}{
		{"killed by its timeout", nil, 50 * time.Millisecond, true},
		{"killed by someone else", [][]byte{killed, frame(2, `{}`)}, time.Hour, false},
		{"no timeout", [][]byte{killed, frame(2, `{}`)}, 0, false},
		{"envd's deadline", [][]byte{frame(2, `{"error":{"code":"deadline_exceeded","message":"context deadline exceeded"}}`)}, 50 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kills := make(chan string, 4)
			treeKilled := make(chan struct{})
			f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if answerKillTree(w, r, body, kills) {
					if strings.Contains(r.URL.Path, "Start") {
						close(treeKilled)
					}
					return
				}
				writeFrames(w, frame(0, `{"event":{"start":{"pid":1}}}`))
				if tt.frames == nil {
					select { // the process runs until its tree is killed
					case <-treeKilled:
						writeFrames(w, killed, frame(2, `{}`))
					case <-r.Context().Done():
					}
					return
				}
				time.Sleep(100 * time.Millisecond)
				writeFrames(w, tt.frames...)
			})
			res, err := f.envd(t, "0.6.13").RunCommand(context.Background(), "sleep 1", CommandOptions{Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if res.TimedOut != tt.want || res.ExitCode != -1 || res.Exited {
				t.Fatalf("result %+v, want TimedOut %v", res, tt.want)
			}
		})
	}
}

func TestProcessUnaryWire(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/process.Process/List" {
			_, _ = w.Write([]byte(`{"processes":[{"config":{"cmd":"/bin/bash","args":["-l","-c","sleep 5"],"envs":{"A":"1"},"cwd":"/tmp"},"pid":1001,"tag":"t"},{"config":{"cmd":"cat"},"pid":"1002"}]}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	e := f.envd(t, "0.6.13")
	ctx := context.Background()
	tests := []struct {
		call func() error
		path string
		body string
	}{
		{func() error { return e.SendSignal(ctx, 42, SIGTERM) }, "/process.Process/SendSignal", `{"process":{"pid":42},"signal":"SIGNAL_SIGTERM"}`},
		{func() error { return e.SendStdin(ctx, 42, []byte("hello\n")) }, "/process.Process/SendInput", `{"process":{"pid":42},"input":{"stdin":"aGVsbG8K"}}`},
		{func() error { return e.SendStdin(ctx, 42, nil) }, "/process.Process/SendInput", `{"process":{"pid":42},"input":{"stdin":""}}`},
		{func() error { return e.SendPTYInput(ctx, 42, []byte("1+1\r")) }, "/process.Process/SendInput", `{"process":{"pid":42},"input":{"pty":"MSsxDQ=="}}`},
		{func() error { return e.CloseStdin(ctx, 42) }, "/process.Process/CloseStdin", `{"process":{"pid":42}}`},
		{func() error { _, err := e.ListProcesses(ctx); return err }, "/process.Process/List", `{}`},
	}
	for _, tt := range tests {
		if err := tt.call(); err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		r := f.last(t)
		if r.path != tt.path || string(r.body) != tt.body || r.header.Get("Content-Type") != "application/json" || r.header.Get("Connect-Protocol-Version") != "1" {
			t.Errorf("%s: sent %s %s %v", tt.path, r.path, r.body, r.header)
		}
	}
	list, err := e.ListProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].PID != 1001 || list[0].Tag != "t" || list[0].Config.Cwd != "/tmp" || list[0].Config.Envs["A"] != "1" ||
		strings.Join(list[0].Config.Args, " ") != "-l -c sleep 5" || list[1].PID != 1002 || list[1].Config.Cmd != "cat" {
		t.Fatalf("list %+v", list)
	}
}

func TestConnectProcessWire(t *testing.T) {
	f := newFakeEnvd(t, answerAll)
	end, err := f.envd(t, "0.6.13").ConnectProcess(context.Background(), 7, nil)
	if err != nil || !end.Exited {
		t.Fatalf("end %+v err %v", end, err)
	}
	r := f.last(t)
	if r.path != "/process.Process/Connect" || !bytes.Equal(r.body, frame(0, `{"process":{"pid":7}}`)) || r.header.Get("Keepalive-Ping-Interval") != "50" {
		t.Fatalf("request %s %q %v", r.path, r.body, r.header)
	}
}

// The exit marker is found however the stream is cut into chunks, is never passed on, and what looks like its
// start but is not stays output.
func TestMarkerScanner(t *testing.T) {
	const marker = "\x1ee2b-mcp-exit-00ff:"
	for _, tc := range []struct {
		stream, out string
		code        int
		seen        bool
	}{
		{"hello\n" + marker + "3\nlater output", "hello\n", 3, true},
		{"no newline" + marker + "0\n", "no newline", 0, true},
		{marker + "-1\n", "", -1, true},
		{"\x1ee2b-mcp-exit-00fe:3\n" + marker[:5] + "x", "\x1ee2b-mcp-exit-00fe:3\n" + marker[:5] + "x", 0, false},
		{marker + "12a\n" + marker + "7\n", marker + "12a\n", 7, true},
		{"cut " + marker[:9], "cut " + marker[:9], 0, false},
	} {
		for size := 1; size <= len(tc.stream); size++ {
			m := markerScanner{marker: []byte(marker)}
			var out strings.Builder
			for i := 0; i < len(tc.stream); i += size {
				out.Write(m.feed([]byte(tc.stream[i:min(i+size, len(tc.stream))])))
			}
			out.Write(m.flush())
			if out.String() != tc.out || m.seen != tc.seen || m.code != tc.code {
				t.Fatalf("%q in chunks of %d: out %q seen %v code %d", tc.stream, size, out.String(), m.seen, m.code)
			}
		}
	}
}
