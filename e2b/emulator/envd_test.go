package emulator

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Tests of the emulated envd on the wire: the exact answers of a real envd, byte for byte (docs/e2b.md,
// "envd's answers on the wire").

const envdTestKey = "e2b_0a1b2c3d4e5f60718293"

// envdServer is an emulator for the envd tests, made as for the control plane's: New refuses to start one that
// cannot isolate sandbox processes.
func envdServer(t *testing.T, opts Options) *Server {
	t.Helper()
	return newCPServer(t, opts)
}

// envdBox is a sandbox of a test emulator, reached over raw HTTP.
type envdBox struct {
	s         *Server
	id, token string
}

func envdCreate(t *testing.T, s *Server, body map[string]any) envdBox {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["templateID"]; !ok {
		body["templateID"] = "base"
	}
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/sandboxes", bytes.NewReader(data))
	req.Header.Set("X-API-Key", envdTestKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&sb) != nil {
		t.Fatalf("create: HTTP %d", resp.StatusCode)
	}
	return envdBox{s: s, id: sb.SandboxID, token: sb.EnvdAccessToken}
}

// do sends an envd request with the routing headers and the sandbox's token; a header set to "" is removed.
func (b envdBox) do(t *testing.T, method, pathQuery string, hdr map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, b.s.URL()+pathQuery, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", b.id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	if b.token != "" {
		req.Header.Set("X-Access-Token", b.token)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func (b envdBox) unary(t *testing.T, procedure, body string, hdr map[string]string) (int, string) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
	for k, v := range hdr {
		h[k] = v
	}
	resp, data := b.do(t, http.MethodPost, "/"+procedure, h, []byte(body))
	return resp.StatusCode, string(data)
}

type envdFrame struct {
	flags byte
	data  string
}

func envdEnvelope(msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// parseFrames splits a stream body into envelopes; rest holds bytes that do not make a whole envelope.
func parseFrames(body []byte) (frames []envdFrame, rest []byte) {
	for len(body) >= 5 {
		n := int(binary.BigEndian.Uint32(body[1:5]))
		if len(body) < 5+n {
			break
		}
		frames = append(frames, envdFrame{body[0], string(body[5 : 5+n])})
		body = body[5+n:]
	}
	return frames, body
}

func (b envdBox) stream(t *testing.T, procedure, body string, hdr map[string]string) (*http.Response, []envdFrame) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1", "Connect-Content-Encoding": "identity"}
	for k, v := range hdr {
		h[k] = v
	}
	resp, data := b.do(t, http.MethodPost, "/"+procedure, h, envdEnvelope(body))
	frames, rest := parseFrames(data)
	if len(rest) != 0 {
		t.Fatalf("stream ends inside an envelope: %q", rest)
	}
	return resp, frames
}

func startBody(command string) string {
	b, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", command}}, "stdin": false})
	return string(b)
}

// run starts a command and returns its frames; the stream must end with an end-of-stream message.
func (b envdBox) run(t *testing.T, command string, hdr map[string]string) []envdFrame {
	t.Helper()
	resp, frames := b.stream(t, "process.Process/Start", startBody(command), hdr)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("HTTP %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(frames) == 0 || frames[len(frames)-1].flags != connectframe.FlagEndStream {
		t.Fatalf("no end-of-stream message: %+v", frames)
	}
	return frames
}

// output joins the stdout and stderr of data frames.
func output(t *testing.T, frames []envdFrame) (stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	for _, f := range frames {
		var m struct {
			Event struct {
				Data *struct{ Stdout, Stderr []byte } `json:"data"`
			} `json:"event"`
		}
		if f.flags != 0 || json.Unmarshal([]byte(f.data), &m) != nil || m.Event.Data == nil {
			continue
		}
		out.Write(m.Event.Data.Stdout)
		errb.Write(m.Event.Data.Stderr)
	}
	return out.String(), errb.String()
}

var startFrame = regexp.MustCompile(`^\{"event":\{"start":\{"pid":[1-9][0-9]*\}\}\}$`)

func TestEnvdStartFrames(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	tests := []struct {
		command, stdout, stderr, end string
	}{
		{"echo hello; echo oops >&2; exit 3", "hello\n", "oops\n",
			`{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}`},
		{"echo hi", "hi\n", "", `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`},
		{"nosuchcommand-xyz", "", "/bin/bash: line 1: nosuchcommand-xyz: command not found\n",
			`{"event":{"end":{"exitCode":127,"exited":true,"status":"exit status 127","error":"exit status 127"}}}`},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		frames := b.run(t, tt.command, nil)
		// The pid is the process's own in the sandbox, as kill inside the sandbox knows it.
		if !startFrame.MatchString(frames[0].data) || frames[0].flags != 0 || seen[frames[0].data] {
			t.Errorf("%q: first frame %+v, want a start event with a new pid", tt.command, frames[0])
		}
		seen[frames[0].data] = true
		stdout, stderr := output(t, frames)
		if stdout != tt.stdout || stderr != tt.stderr {
			t.Errorf("%q: stdout %q stderr %q", tt.command, stdout, stderr)
		}
		n := len(frames)
		if frames[n-2] != (envdFrame{0, tt.end}) || frames[n-1] != (envdFrame{connectframe.FlagEndStream, "{}"}) {
			t.Errorf("%q: last frames %+v", tt.command, frames[n-2:])
		}
	}
}

func TestEnvdDataFrameEncoding(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	frames := b.run(t, "printf hello", nil)
	want := envdFrame{0, `{"event":{"data":{"stdout":"` + base64.StdEncoding.EncodeToString([]byte("hello")) + `"}}}`}
	if frames[1] != want {
		t.Fatalf("data frame %+v, want %+v", frames[1], want)
	}
}

func TestEnvdOutputChunks(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	frames := b.run(t, "head -c 300000 /dev/zero | tr '\\0' x", nil)
	total := 0
	for _, f := range frames[1 : len(frames)-2] {
		var m struct {
			Event struct {
				Data struct{ Stdout []byte } `json:"data"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(f.data), &m); err != nil {
			t.Fatal(err)
		}
		if n := len(m.Event.Data.Stdout); n == 0 || n > 32<<10 {
			t.Fatalf("data event of %d bytes; envd sends 1..32768", n)
		}
		total += len(m.Event.Data.Stdout)
	}
	if total != 300000 {
		t.Fatalf("%d bytes of output, want 300000", total)
	}
}

// At Connect-Timeout-Ms envd kills the process and ends the stream with deadline_exceeded, without an end event
// (docs/e2b.md, "Processes in envd").
func TestEnvdTimeoutKills(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	// Left alone, sleep ends with an end event (exit 0): only the kill at the deadline gives the frames wanted.
	frames := b.run(t, "sleep 30", map[string]string{"Connect-Timeout-Ms": "300"})
	want := envdFrame{connectframe.FlagEndStream, `{"error":{"code":"deadline_exceeded","message":"context deadline exceeded"}}`}
	if len(frames) != 2 || frames[1] != want {
		t.Fatalf("frames %+v, want the start and %+v", frames, want)
	}
	waitfor.Until(t, 30*time.Second, "the process to be killed", func() bool {
		_, body := b.unary(t, "process.Process/List", `{}`, nil)
		return !strings.Contains(string(body), "sleep")
	})
}

func TestEnvdStreamedErrors(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	tests := []struct {
		name, body string
		hdr        map[string]string
		want       string
	}{
		{"cwd does not exist", `{"process":{"cmd":"/bin/bash","args":["-c","true"],"cwd":"/nope"},"stdin":false}`, nil,
			`{"error":{"code":"invalid_argument","message":"cwd '/nope' does not exist"}}`},
		{"relative cwd is under home", `{"process":{"cmd":"true","cwd":"nope"}}`, nil,
			`{"error":{"code":"invalid_argument","message":"cwd '/home/user/nope' does not exist"}}`},
		{"unknown user", startBody("true"), map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("nobodyx:"))},
			`{"error":{"code":"unauthenticated","message":"invalid username: 'nobodyx'"}}`},
		{"bad timeout", startBody("true"), map[string]string{"Connect-Timeout-Ms": "soon"},
			`{"error":{"code":"invalid_argument","message":"parse timeout: strconv.ParseInt: parsing \"soon\": invalid syntax"}}`},
		{"negative timeout", startBody("true"), map[string]string{"Connect-Timeout-Ms": "-5"},
			`{"error":{"code":"invalid_argument","message":"parse timeout: \"-5\" is negative"}}`},
		{"malformed request", `{"process":`, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, frames := b.stream(t, "process.Process/Start", tt.body, tt.hdr)
			if resp.StatusCode != http.StatusOK || len(frames) != 1 || frames[0].flags != connectframe.FlagEndStream {
				t.Fatalf("HTTP %d frames %+v: want 200 and one end-of-stream message", resp.StatusCode, frames)
			}
			if tt.want != "" && frames[0].data != tt.want {
				t.Fatalf("end of stream %s\nwant           %s", frames[0].data, tt.want)
			}
			if tt.want == "" && !strings.Contains(frames[0].data, `"code":"invalid_argument"`) {
				t.Fatalf("end of stream %s", frames[0].data)
			}
		})
	}
}

// TestEnvdRequestEnvelopeErrors checks the answers to a stream's request envelope that is cut, oversized or
// compressed without a declared encoding, as connect-go words them.
func TestEnvdRequestEnvelopeErrors(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	hdr := map[string]string{"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1", "Connect-Content-Encoding": ""}
	whole := envdEnvelope(startBody("true"))
	compressed := append([]byte{1}, whole[1:]...)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, `{"error":{"code":"invalid_argument","message":"protocol error: incomplete envelope: EOF"}}`},
		{"cut header", whole[:3], `{"error":{"code":"invalid_argument","message":"protocol error: incomplete envelope: unexpected EOF"}}`},
		{"cut payload", whole[:9], fmt.Sprintf(`{"error":{"code":"invalid_argument","message":"protocol error: promised %d bytes in enveloped message, got fewer: unexpected EOF"}}`, len(whole)-5)},
		{"no payload", whole[:5], fmt.Sprintf(`{"error":{"code":"invalid_argument","message":"protocol error: promised %d bytes in enveloped message, got fewer: EOF"}}`, len(whole)-5)},
		{"oversized", []byte{0, 0x7f, 0, 0, 0}, `{"error":{"code":"resource_exhausted","message":"message size 2130706432 is larger than configured max 8388608"}}`},
		{"compressed", compressed, `{"error":{"code":"internal","message":"protocol error: received compressed message without compression support"}}`},
		{"two messages", append(slices.Clone(whole), whole...), `{"error":{"code":"unimplemented","message":"unary request has multiple messages"}}`},
		{"cut second message", append(slices.Clone(whole), whole[:3]...), `{"error":{"code":"invalid_argument","message":"protocol error: incomplete envelope: unexpected EOF"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := b.do(t, http.MethodPost, "/process.Process/Start", hdr, tt.body)
			frames, rest := parseFrames(data)
			if resp.StatusCode != http.StatusOK || len(rest) != 0 || len(frames) != 1 || frames[0].flags != connectframe.FlagEndStream {
				t.Fatalf("HTTP %d frames %+v rest %q: want 200 and one end-of-stream message", resp.StatusCode, frames, rest)
			}
			if frames[0].data != tt.want {
				t.Fatalf("end of stream %s\nwant           %s", frames[0].data, tt.want)
			}
		})
	}
}

// A stream's answer starts only once its request has ended, as with connect-go: a proxy in front of envd that
// forwards a chunked body has then read all of it.
func TestEnvdAnswersAfterTheRequestEnds(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, b.s.URL()+"/process.Process/Start", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", b.id)
	req.Header.Set("X-Access-Token", b.token)
	req.Header.Set("Content-Type", "application/connect+json")
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(answered)
			return
		}
		answered <- resp
	}()
	if _, err := pw.Write(envdEnvelope(startBody("echo hi"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-answered:
		t.Fatal("the stream answered before its request ended")
	case <-time.After(300 * time.Millisecond):
	}
	pw.Close()
	resp := waitfor.Recv(t, answered, 30*time.Second, "the stream's answer once its request ended")
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	frames, _ := parseFrames(data)
	if resp.StatusCode != http.StatusOK || len(frames) < 3 || frames[len(frames)-1].data != "{}" {
		t.Fatalf("HTTP %d, frames %+v", resp.StatusCode, frames)
	}
}

func TestEnvdUnaryErrors(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	tests := []struct {
		name, procedure, body string
		hdr                   map[string]string
		status                int
		want                  string
	}{
		{"stat missing", "filesystem.Filesystem/Stat", `{"path":"/nonexistent"}`, nil, 404,
			`{"code":"not_found","message":"file not found: lstat /nonexistent: no such file or directory"}`},
		{"list missing", "filesystem.Filesystem/ListDir", `{"path":"/nonexistent"}`, nil, 404,
			`{"code":"not_found","message":"path not found: lstat /nonexistent: no such file or directory"}`},
		{"unknown user", "filesystem.Filesystem/Stat", `{"path":"/"}`, map[string]string{"Authorization": "Basic bm9ib2R5eDo="}, 401,
			`{"code":"unauthenticated","message":"invalid username: 'nobodyx'"}`},
		{"unknown pid", "process.Process/SendSignal", `{"process":{"pid":4242},"signal":"SIGNAL_SIGKILL"}`, nil, 404,
			`{"code":"not_found","message":"process with pid 4242 not found"}`},
		{"mkdir over a file", "filesystem.Filesystem/MakeDir", `{"path":".bashrc"}`, nil, 400,
			`{"code":"invalid_argument","message":"path already exists but it is not a directory: /home/user/.bashrc"}`},
		{"mkdir existing", "filesystem.Filesystem/MakeDir", `{"path":"~"}`, nil, 409,
			`{"code":"already_exists","message":"directory already exists: /home/user"}`},
		{"list a file", "filesystem.Filesystem/ListDir", `{"path":"/home/user/.profile"}`, nil, 400,
			`{"code":"invalid_argument","message":"path is not a directory: /home/user/.profile"}`},
		{"move missing", "filesystem.Filesystem/Move", `{"source":"/tmp/a","destination":"/tmp/b"}`, nil, 404,
			`{"code":"not_found","message":"source file not found: rename /tmp/a /tmp/b: no such file or directory"}`},
		{"other home", "filesystem.Filesystem/Stat", `{"path":"~root/x"}`, nil, 400,
			`{"code":"invalid_argument","message":"failed to expand path '~root/x' for user 'user': cannot expand user-specific home dir"}`},
		{"bad json", "filesystem.Filesystem/Stat", `{"path":1}`, nil, 400, ""},
		{"watchers", "filesystem.Filesystem/CreateWatcher", `{"path":"/tmp"}`, nil, 501, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := b.unary(t, tt.procedure, tt.body, tt.hdr)
			if status != tt.status || (tt.want != "" && body != tt.want) {
				t.Fatalf("HTTP %d %s\nwant %d %s", status, body, tt.status, tt.want)
			}
		})
	}
}

func TestEnvdNotConnect(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	resp, _ := b.do(t, http.MethodGet, "/filesystem.Filesystem/Stat", nil, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d", resp.StatusCode)
	}
	resp, _ = b.do(t, http.MethodPost, "/filesystem.Filesystem/Stat", map[string]string{"Content-Type": "text/plain"}, []byte(`{}`))
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: HTTP %d", resp.StatusCode)
	}
	resp, _ = b.do(t, http.MethodPost, "/filesystem.Filesystem/Nope", map[string]string{"Content-Type": "application/json"}, []byte(`{}`))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown procedure: HTTP %d", resp.StatusCode)
	}
}

func TestEnvdAccessToken(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, map[string]any{"secure": true})
	if b.token == "" {
		t.Fatal("secure sandbox without a token")
	}
	const unauthorized = `{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"}` + "\n"
	for _, token := range []string{"", "wrong"} {
		hdr := map[string]string{"X-Access-Token": token}
		status, body := b.unary(t, "filesystem.Filesystem/Stat", `{"path":"/"}`, hdr)
		if status != 401 || body != unauthorized {
			t.Errorf("token %q: RPC answered %d %s", token, status, body)
		}
		shdr := map[string]string{"Content-Type": "application/connect+json", "X-Access-Token": token}
		resp, data := b.do(t, http.MethodPost, "/process.Process/Start", shdr, envdEnvelope(startBody("true")))
		if resp.StatusCode != 401 || string(data) != unauthorized {
			t.Errorf("token %q: stream answered %d %s", token, resp.StatusCode, data)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("401 content type %q", ct)
		}
		resp, _ = b.do(t, http.MethodGet, "/health", hdr, nil)
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("token %q: /health answered %d", token, resp.StatusCode)
		}
	}
	if status, _ := b.unary(t, "filesystem.Filesystem/Stat", `{"path":"/"}`, nil); status != 200 {
		t.Errorf("with the token: %d", status)
	}
}

func TestEnvdKeepalive(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	frames := b.run(t, "sleep 1.3; echo done", map[string]string{"Keepalive-Ping-Interval": "1"})
	if len(frames) < 4 || frames[1] != (envdFrame{0, `{"event":{"keepalive":{}}}`}) {
		t.Fatalf("frames %+v: want a keepalive while the command is silent", frames)
	}
}

func TestEnvdProcessEnvironment(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), map[string]any{"envVars": map[string]string{"FOO": "bar", "BOTH": "sandbox"}})
	body := `{"process":{"cmd":"/bin/bash","args":["-c","echo $FOO $BOTH $ONLY $HOME $USER $LOGNAME; pwd; whoami; echo $PATH"],"envs":{"BOTH":"request","ONLY":"req"}},"stdin":false}`
	_, frames := b.stream(t, "process.Process/Start", body, nil)
	stdout, _ := output(t, frames)
	want := "bar request req /home/user user user\n/home/user\nuser\n" + sandboxPATH + "\n"
	if stdout != want {
		t.Fatalf("stdout %q\nwant   %q", stdout, want)
	}
	_, frames = b.stream(t, "process.Process/Start", startBody("whoami; pwd; id -u"), map[string]string{"Authorization": "Basic cm9vdDo="})
	// The sandbox's default workdir applies to every user, as in envd.
	if stdout, _ := output(t, frames); stdout != "root\n/home/user\n0\n" {
		t.Fatalf("as root: %q", stdout)
	}
}

func TestEnvdIsolation(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	host := t.TempDir()
	secret := filepath.Join(host, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(s.URL(), "http://127.0.0.1:")
	checks := []struct{ name, command, stdout string }{
		{"no network", "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected || echo refused", "refused\n"},
		{"no host files", "cat " + secret + " 2>/dev/null || echo absent", "absent\n"},
		{"own passwd", "getent passwd user root | cut -d: -f1,3,6", "user:1000:/home/user\nroot:0:/root\n"},
		// bwrap (pid 1), the sandbox's init script, bash, ps and wc: the processes of this sandbox only
		{"own pid namespace", "ps -e -o pid= | wc -l", "5\n"},
		{"system directories are read-only", "touch /usr/x 2>/dev/null || echo refused", "refused\n"},
		{"home is writable", "echo x > ~/w && cat ~/w", "x\n"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr := output(t, b.run(t, c.command, nil))
			if stdout != c.stdout {
				t.Fatalf("stdout %q (stderr %q), want %q", stdout, stderr, c.stdout)
			}
		})
	}
}

func TestEnvdStdinAndSignals(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	type result struct {
		frames []envdFrame
	}
	done := make(chan result, 1)
	go func() {
		_, frames := b.stream(t, "process.Process/Start", `{"process":{"cmd":"/bin/cat"},"tag":"cat-1"}`, nil)
		done <- result{frames}
	}()
	pid := envdWaitProcess(t, b, "cat-1")
	if status, body := b.unary(t, "process.Process/List", `{}`, nil); status != 200 ||
		body != fmt.Sprintf(`{"processes":[{"config":{"cmd":"/bin/cat"},"pid":%d,"tag":"cat-1"}]}`, pid) {
		t.Fatalf("list: %d %s", status, body)
	}
	input := base64.StdEncoding.EncodeToString([]byte("to cat\n"))
	if status, body := b.unary(t, "process.Process/SendInput", fmt.Sprintf(`{"process":{"pid":%d},"input":{"stdin":%q}}`, pid, input), nil); status != 200 || body != "{}" {
		t.Fatalf("send input: %d %s", status, body)
	}
	if status, body := b.unary(t, "process.Process/CloseStdin", `{"process":{"tag":"cat-1"}}`, nil); status != 200 {
		t.Fatalf("close stdin: %d %s", status, body)
	}
	r := waitfor.Recv(t, done, 30*time.Second, "cat's stream to end once its stdin closed")
	if stdout, _ := output(t, r.frames); stdout != "to cat\n" {
		t.Fatalf("cat printed %q", stdout)
	}
	if end := r.frames[len(r.frames)-2].data; end != `{"event":{"end":{"exited":true,"status":"exit status 0"}}}` {
		t.Fatalf("end %s", end)
	}

	go func() {
		_, frames := b.stream(t, "process.Process/Start", `{"process":{"cmd":"sleep","args":["30"]},"stdin":false,"tag":"sleeper"}`, nil)
		done <- result{frames}
	}()
	pid = envdWaitProcess(t, b, "sleeper")
	if status, body := b.unary(t, "process.Process/SendInput", fmt.Sprintf(`{"process":{"pid":%d},"input":{"stdin":"eA=="}}`, pid), nil); status != 500 ||
		body != `{"code":"internal","message":"error writing to stdin: stdin not enabled or closed"}` {
		t.Fatalf("input without stdin: %d %s", status, body)
	}
	if status, body := b.unary(t, "process.Process/SendSignal", fmt.Sprintf(`{"process":{"pid":%d},"signal":"SIGNAL_UNSPECIFIED"}`, pid), nil); status != 501 ||
		body != `{"code":"unimplemented","message":"invalid signal: SIGNAL_UNSPECIFIED"}` {
		t.Fatalf("unsupported signal: %d %s", status, body)
	}
	if status, body := b.unary(t, "process.Process/SendSignal", fmt.Sprintf(`{"process":{"pid":%d},"signal":"SIGNAL_SIGTERM"}`, pid), nil); status != 200 {
		t.Fatalf("SIGTERM: %d %s", status, body)
	}
	r = waitfor.Recv(t, done, 30*time.Second, "sleep's stream to end at its SIGTERM")
	if end := r.frames[len(r.frames)-2].data; end != `{"event":{"end":{"exitCode":-1,"status":"signal: terminated","error":"signal: terminated"}}}` {
		t.Fatalf("end after SIGTERM %s", end)
	}
}

// envdWaitProcess waits until a process with the tag runs and returns its pid.
func envdWaitProcess(t *testing.T, b envdBox, tag string) int {
	t.Helper()
	pid := 0
	waitfor.Until(t, 10*time.Second, fmt.Sprintf("process %q to start", tag), func() bool {
		_, body := b.unary(t, "process.Process/List", `{}`, nil)
		var list struct {
			Processes []struct {
				PID int    `json:"pid"`
				Tag string `json:"tag"`
			} `json:"processes"`
		}
		_ = json.Unmarshal([]byte(body), &list)
		for _, p := range list.Processes {
			if p.Tag == tag {
				pid = p.PID
			}
		}
		return pid != 0
	})
	return pid
}

func TestEnvdConnectReplaysTheEnd(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := envdCreate(t, envdServer(t, Options{Now: clock}), nil)
	frames := b.run(t, "exit 4", nil)
	var start struct {
		Event struct{ Start struct{ PID int } } `json:"event"`
	}
	_ = json.Unmarshal([]byte(frames[0].data), &start)
	body := fmt.Sprintf(`{"process":{"pid":%d}}`, start.Event.Start.PID)
	_, got := b.stream(t, "process.Process/Connect", body, nil)
	want := []envdFrame{
		{0, frames[0].data},
		{0, `{"event":{"end":{"exitCode":4,"exited":true,"status":"exit status 4","error":"exit status 4"}}}`},
		{connectframe.FlagEndStream, "{}"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("connect after the end: %+v\nwant %+v", got, want)
	}
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	_, got = b.stream(t, "process.Process/Connect", body, nil)
	if len(got) != 1 || got[0].data != fmt.Sprintf(`{"error":{"code":"not_found","message":"process with pid %d not found"}}`, start.Event.Start.PID) {
		t.Fatalf("connect 31 s after the end: %+v", got)
	}
}

// hostPID is the host pid of a sandbox process, for checking what pausing does to it.
func hostPID(t *testing.T, s *Server, id string, pid int) int {
	t.Helper()
	s.envd.mu.Lock()
	st := s.envd.boxes[id]
	s.envd.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	p := st.procs[uint32(pid)]
	if p == nil {
		t.Fatalf("no process %d", pid)
	}
	return p.proc.Pid
}

// procState is the state letter of a host process ("T" when stopped), or "" when it is gone.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

func TestEnvdPauseResumeKill(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	cut := make(chan []byte, 1)
	go func() {
		h := map[string]string{"Content-Type": "application/connect+json"}
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/process.Process/Start", bytes.NewReader(envdEnvelope(`{"process":{"cmd":"sleep","args":["60"]},"tag":"long"}`)))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		req.Header.Set("E2b-Sandbox-Id", b.id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cut <- nil
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cut <- data
	}()
	pid := envdWaitProcess(t, b, "long")
	host := hostPID(t, s, b.id, pid)

	pause := func(action string) {
		body := `{"timeout":60}`
		if action == "pause" {
			body = `{"memory":true}`
		}
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/sandboxes/"+b.id+"/"+action, strings.NewReader(body))
		req.Header.Set("X-API-Key", envdTestKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s: HTTP %d", action, resp.StatusCode)
		}
	}
	pause("pause")
	waitfor.Until(t, 30*time.Second, "the paused sandbox's process to stop", func() bool { return procState(host) == "T" })
	data := waitfor.Recv(t, cut, 30*time.Second, "the paused sandbox's stream to be cut")
	frames, _ := parseFrames(data)
	if len(frames) == 0 || frames[len(frames)-1].flags == connectframe.FlagEndStream {
		t.Fatalf("the stream of a paused sandbox was not cut: %+v", frames)
	}
	pause("connect")
	waitfor.Until(t, 30*time.Second, "the process to continue", func() bool { return procState(host) == "S" || procState(host) == "R" })
	if got := envdWaitProcess(t, b, "long"); got != pid {
		t.Fatalf("after resume the process is %d, want %d", got, pid)
	}
	req, _ := http.NewRequest(http.MethodDelete, s.URL()+"/sandboxes/"+b.id, nil)
	req.Header.Set("X-API-Key", envdTestKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitfor.Until(t, 30*time.Second, "the process to be gone", func() bool { return procState(host) == "" || procState(host) == "Z" })
}

func TestEnvdDeadlineHeldWhilePaused(t *testing.T) {
	p := &envdProcess{}
	p.mu.Lock()
	p.deadline = time.Now().Add(time.Hour)
	p.timer = time.AfterFunc(time.Hour, func() {})
	p.mu.Unlock()
	p.pauseDeadline()
	if p.timer != nil || p.remaining < 59*time.Minute {
		t.Fatalf("pause kept timer %v, remaining %v", p.timer, p.remaining)
	}
	p.resumeDeadline()
	if p.timer == nil || time.Until(p.deadline) < 59*time.Minute {
		t.Fatalf("resume: timer %v, deadline in %v", p.timer, time.Until(p.deadline))
	}
	p.timer.Stop()
}

func TestEnvdIsolationMissing(t *testing.T) {
	iso := isolation{err: errors.New("no bwrap here")}
	if _, _, err := iso.command(procSpec{}); err == nil || err.Error() != "no bwrap here" {
		t.Fatalf("command without isolation: %v", err)
	}
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	s.envd.isolation = func() isolation {
		return isolation{err: errors.New("emulator: bubblewrap (/usr/bin/bwrap) is not installed")}
	}
	_, frames := b.stream(t, "process.Process/Start", startBody("true"), nil)
	want := `{"error":{"code":"invalid_argument","message":"error starting process '/bin/bash -l -c true': emulator: bubblewrap (/usr/bin/bwrap) is not installed"}}`
	if len(frames) != 1 || frames[0].data != want {
		t.Fatalf("frames %+v\nwant %s", frames, want)
	}
}

// The host's probe of bubblewrap runs in the background: New returns while it is still running, and a create
// waits for its answer, here that sandboxes cannot be isolated, which the create then says.
func TestEnvdIsolationProbedInTheBackground(t *testing.T) {
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	probe := func() isolation {
		<-release
		return isolation{err: errors.New("emulator: bubblewrap (/usr/bin/bwrap) is not installed")}
	}
	type made struct {
		s   *Server
		err error
	}
	news := make(chan made, 1)
	go func() {
		s, err := New(Options{ExpiryInterval: -1, probeIsolation: probe})
		news <- made{s, err}
	}()
	var s *Server
	select {
	case m := <-news:
		if m.err != nil {
			t.Fatal(m.err)
		}
		s = m.s
		t.Cleanup(s.Close)
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return within 30s while the isolation probe was still running")
	}
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateSandbox("e2b_"+strings.Repeat("a", 40), SandboxOptions{})
		created <- err
	}()
	close(release)
	select {
	case err := <-created:
		if err == nil || !strings.Contains(err.Error(), "bubblewrap (/usr/bin/bwrap) is not installed") {
			t.Fatalf("a create where sandboxes cannot be isolated: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the create did not answer within 30s of the probe's answer")
	}
	if err := s.Isolated(); err == nil {
		t.Error("Isolated: nil where the probe found no bubblewrap")
	}
}

// TestEnvdRequestRacingAKill serves a request for a sandbox the moment after it was killed (the edge let it
// through just before): it must not bring the sandbox's directory or processes back.
func TestEnvdRequestRacingAKill(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	s.mu.Lock()
	sb := s.sandboxes[b.id]
	s.mu.Unlock()
	if !s.Vanish(b.id) {
		t.Fatal("the sandbox was not there to kill")
	}
	req := httptest.NewRequest(http.MethodPost, "/process.Process/Start", bytes.NewReader(envdEnvelope(startBody("true"))))
	req.Header.Set("Content-Type", "application/connect+json")
	rec := httptest.NewRecorder()
	s.envd.serve(rec, req, sb)
	if rec.Code != http.StatusBadGateway {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Body.String())
	}
	if _, err := os.Stat(sb.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed sandbox's directory came back: %v", err)
	}
}

// A command that ends at once still starts: the emulator must find its process before nsenter reaps it.
func TestEnvdInstantCommandsStart(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, frames := b.stream(t, "process.Process/Start", startBody("exit "+strconv.Itoa(i%3)), nil)
			last := frames[len(frames)-1]
			if len(frames) < 3 || last.flags != connectframe.FlagEndStream || last.data != "{}" {
				t.Errorf("command %d did not run to its end: %+v", i, frames)
			}
		}()
	}
	waitfor.Return(t, time.Minute, "the concurrent commands to end", wg.Wait)
}

// The output events the stream writer writes by hand are those the declared message encodes to, byte for byte.
func TestOutputEventsAreEnvdsMessage(t *testing.T) {
	for _, data := range [][]byte{[]byte("hello\n"), {}, {0xfb, 0xff, 0xfe}, bytes.Repeat([]byte{'x'}, 40000)} {
		for _, stream := range []outputStream{streamStdout, streamStderr, streamPTY} {
			rec := httptest.NewRecorder()
			if err := newStreamWriter(rec).sendOutput(stream, data); err != nil {
				t.Fatal(err)
			}
			_, got, err := connectframe.NewReader(rec.Body, 1<<20).Next()
			if err != nil {
				t.Fatal(err)
			}
			b := envd.Bytes(data)
			ev := envd.DataEvent{}
			switch stream {
			case streamStdout:
				ev.Stdout = &b
			case streamStderr:
				ev.Stderr = &b
			case streamPTY:
				ev.PTY = &b
			}
			want, err := json.Marshal(envd.EventMessage{Event: &envd.ProcessEvent{Data: &ev}})
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s output of %d bytes is written %.80s, the message is %.80s (%v)", stream, len(data), got,
					want, err)
			}
		}
	}
}
