package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// The envd client against the emulator: every operation and its errors, end to end.

type envdEmu struct {
	srv    *e2btest.Server
	client *Client
	sb     *Sandbox
	envd   *Envd
}

func newEnvdEmu(t *testing.T, opts e2btest.Options, req NewSandbox) *envdEmu {
	t.Helper()
	if opts.ExpiryInterval == 0 {
		opts.ExpiryInterval = -1
	}
	srv, err := e2btest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: srv.URL(), SandboxURL: srv.URL(), RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	if req.Timeout == 0 {
		req.Timeout = 300
	}
	sb, err := c.CreateSandbox(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return &envdEmu{srv: srv, client: c, sb: sb, envd: c.Envd(c.Conn(sb))}
}

func emuCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run runs a command and returns its result and output.
func (m *envdEmu) run(t *testing.T, e *Envd, command string, opts CommandOptions) (CommandResult, string, string, error) {
	t.Helper()
	var stdout, stderr strings.Builder
	opts.OnOutput = func(k EventKind, d []byte) {
		if k == EventStderr {
			stderr.Write(d)
		} else {
			stdout.Write(d)
		}
	}
	res, err := e.RunCommand(emuCtx(t), command, opts)
	return res, stdout.String(), stderr.String(), err
}

func TestEmulatorRunCommand(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true, EnvVars: map[string]string{"FOO": "bar"}})
	if _, err := m.envd.MakeDir(emuCtx(t), "work"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, command  string
		opts           CommandOptions
		stdout, stderr string
		end            ProcessEnd
	}{
		{"success", "echo hi", CommandOptions{}, "hi\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
		{"failure", "echo out; echo err >&2; exit 3", CommandOptions{}, "out\n", "err\n",
			ProcessEnd{ExitCode: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}},
		{"default user and workdir", "whoami; pwd", CommandOptions{}, "user\n/home/user\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
		{"relative cwd", "pwd", CommandOptions{Cwd: "work"}, "/home/user/work\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
		{"environment", "echo $FOO $BAR", CommandOptions{Envs: map[string]string{"BAR": "baz"}}, "bar baz\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
		{"request env wins", "echo $FOO", CommandOptions{Envs: map[string]string{"FOO": "mine"}}, "mine\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pid uint32
			tt.opts.OnStart = func(p uint32) { pid = p }
			res, stdout, stderr, err := m.run(t, m.envd, tt.command, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.ProcessEnd != tt.end || res.TimedOut || res.PID == 0 || res.PID != pid {
				t.Fatalf("result %+v (pid from OnStart %d), want %+v", res, pid, tt.end)
			}
			if stdout != tt.stdout || stderr != tt.stderr {
				t.Fatalf("stdout %q stderr %q", stdout, stderr)
			}
		})
	}
	res, stdout, _, err := m.run(t, m.envd.WithUser("root"), "whoami", CommandOptions{Cwd: "/root"})
	if err != nil || stdout != "root\n" || res.ExitCode != 0 {
		t.Fatalf("as root: %q %+v %v", stdout, res, err)
	}
	_, _, _, err = m.run(t, m.envd.WithUser("nobodyx"), "true", CommandOptions{})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "unauthenticated" || apiErr.Message != "invalid username: 'nobodyx'" || !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unknown user: %v", err)
	}
	_, _, _, err = m.run(t, m.envd, "true", CommandOptions{Cwd: "/nope"})
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Message != "cwd '/nope' does not exist" {
		t.Fatalf("bad cwd: %v", err)
	}
}

func TestEmulatorCommandTimeout(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{})
	start := time.Now()
	res, _, _, err := m.run(t, m.envd, "sleep 30", CommandOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != -1 || res.Exited || res.Status != "signal: killed" {
		t.Fatalf("result %+v after %v", res, time.Since(start))
	}
}

func TestEmulatorCancelKillsCommand(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{})
	ctx, cancel := context.WithCancel(emuCtx(t))
	res, err := m.envd.RunCommand(ctx, "sleep 30", CommandOptions{OnStart: func(uint32) { cancel() }})
	if !errors.Is(err, context.Canceled) || res.PID == 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	waitfor.Until(t, 10*time.Second, "the abandoned command to end", func() bool {
		list, err := m.envd.ListProcesses(emuCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return len(list) == 0
	})
}

// background starts a process and returns its pid and a channel with its end.
func (m *envdEmu) background(t *testing.T, opts StartOptions, onData func([]byte)) (uint32, <-chan ProcessEnd) {
	t.Helper()
	pidc := make(chan uint32, 1)
	endc := make(chan ProcessEnd, 1)
	go func() {
		end, err := m.envd.Start(context.Background(), opts, func(ev ProcessEvent) {
			switch ev.Kind {
			case EventStart:
				pidc <- ev.PID
			case EventStdout, EventStderr:
				if onData != nil {
					onData(ev.Data)
				}
			}
		})
		if err != nil {
			end = ProcessEnd{Status: "error: " + err.Error()}
		}
		endc <- end
	}()
	select {
	case pid := <-pidc:
		return pid, endc
	case end := <-endc:
		t.Fatalf("process ended before starting: %+v", end)
	case <-time.After(20 * time.Second):
		t.Fatal("no start event")
	}
	return 0, nil
}

func TestEmulatorStdinSignalsListConnect(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true})
	ctx := emuCtx(t)
	var mu sync.Mutex
	var got bytes.Buffer
	echoed := make(chan struct{}, 1)
	pid, end := m.background(t, StartOptions{Process: ProcessConfig{Cmd: "/bin/cat"}, Stdin: true, Tag: "cat"}, func(d []byte) {
		mu.Lock()
		got.Write(d)
		mu.Unlock()
		echoed <- struct{}{}
	})
	list, err := m.envd.ListProcesses(ctx)
	if err != nil || len(list) != 1 || list[0].PID != pid || list[0].Tag != "cat" || list[0].Config.Cmd != "/bin/cat" {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := m.envd.SendStdin(ctx, pid, []byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	waitfor.Recv(t, echoed, 30*time.Second, "cat to echo the ping")
	if err := m.envd.CloseStdin(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if e := waitfor.Recv(t, end, 30*time.Second, "cat to end once its stdin closed"); e != (ProcessEnd{Exited: true, Status: "exit status 0"}) {
		t.Fatalf("cat ended %+v", e)
	}
	mu.Lock()
	if got.String() != "ping\n" {
		t.Fatalf("cat echoed %q", got.String())
	}
	mu.Unlock()

	pid, end = m.background(t, StartOptions{Process: ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"}}}, nil)
	var attached strings.Builder
	cend, err := m.envd.ConnectProcess(ctx, pid, func(ev ProcessEvent) {
		if ev.Kind == EventStdout {
			attached.Write(ev.Data)
		}
	})
	if err != nil || cend != (ProcessEnd{Exited: true, Status: "exit status 0"}) || !strings.HasSuffix(attached.String(), "6\n") {
		t.Fatalf("connect: %+v %v, saw %q", cend, err, attached.String())
	}
	waitfor.Recv(t, end, 30*time.Second, "the counting loop to end")
	if again, err := m.envd.ConnectProcess(ctx, pid, nil); err != nil || again != cend {
		t.Fatalf("connect after the end: %+v %v, want the end replayed", again, err)
	}

	pid, end = m.background(t, StartOptions{Process: ProcessConfig{Cmd: "sleep", Args: []string{"30"}}}, nil)
	if err := m.envd.SendSignal(ctx, pid, SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := waitfor.Recv(t, end, 30*time.Second, "sleep to end at its SIGTERM"); e != (ProcessEnd{ExitCode: -1, Status: "signal: terminated", Error: "signal: terminated"}) {
		t.Fatalf("after SIGTERM %+v", e)
	}
	for _, err := range []error{
		m.envd.SendSignal(ctx, 99999, SIGKILL),
		m.envd.SendStdin(ctx, 99999, []byte("x")),
		m.envd.CloseStdin(ctx, 99999),
	} {
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "process with pid 99999 not found") {
			t.Errorf("unknown pid: %v", err)
		}
	}
	if _, err := m.envd.ConnectProcess(ctx, 99999, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("connect to an unknown pid: %v", err)
	}
}

func TestEmulatorLargeOutputStreams(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{})
	var total, chunks, biggest int
	_, err := m.envd.RunCommand(emuCtx(t), "head -c 5000000 /dev/zero", CommandOptions{OnOutput: func(_ EventKind, d []byte) {
		total += len(d)
		chunks++
		biggest = max(biggest, len(d))
	}})
	if err != nil || total != 5000000 || biggest > 32<<10 || chunks < 5000000/(32<<10) {
		t.Fatalf("total %d in %d chunks (largest %d), err %v", total, chunks, biggest, err)
	}
}

func TestEmulatorFilesystem(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true})
	ctx := emuCtx(t)
	e := m.envd
	if created, err := e.MakeDir(ctx, "/home/user/a/b"); !created || err != nil {
		t.Fatalf("make dir: %v %v", created, err)
	}
	if created, err := e.MakeDir(ctx, "~/a/b"); created || err != nil {
		t.Fatalf("make an existing dir: %v %v", created, err)
	}
	if _, err := e.Upload(ctx, "a/b/f.txt", strings.NewReader("12345")); err != nil {
		t.Fatal(err)
	}
	st, err := e.Stat(ctx, "a/b/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "f.txt" || st.Path != "/home/user/a/b/f.txt" || st.Type != FileTypeFile || st.Size != 5 || st.Mode != 0o644 ||
		st.Permissions != "-rw-r--r--" || st.Owner != "user" || st.Group != "user" || time.Since(st.ModifiedTime) > time.Minute {
		t.Fatalf("stat %+v", st)
	}
	list, err := e.ListDir(ctx, "/home/user/a", 2)
	if err != nil || len(list) != 2 || list[0].Path != "/home/user/a/b" || list[0].Type != FileTypeDirectory || list[0].Mode != 0o755 || list[1].Path != "/home/user/a/b/f.txt" {
		t.Fatalf("list %+v %v", list, err)
	}
	if list, err := e.ListDir(ctx, "/home/user/a", 0); err != nil || len(list) != 1 {
		t.Fatalf("depth 0 lists one level: %+v %v", list, err)
	}
	moved, err := e.Move(ctx, "a/b/f.txt", "/tmp/x/g.txt")
	if err != nil || moved.Path != "/tmp/x/g.txt" || moved.Size != 5 {
		t.Fatalf("move %+v %v", moved, err)
	}
	if err := e.Remove(ctx, "/home/user/a"); err != nil {
		t.Fatal(err)
	}
	if err := e.Remove(ctx, "/home/user/a"); err != nil {
		t.Fatalf("removing what is gone: %v", err)
	}
	_, err = e.Stat(ctx, "/home/user/a")
	if !errors.Is(err, ErrNotFound) || err.Error() != "E2B API error (envd Stat: 404 not_found): file not found: lstat /home/user/a: no such file or directory" {
		t.Fatalf("stat of a removed dir: %v", err)
	}
	_, err = e.ListDir(ctx, "/nonexistent", 1)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "path not found: lstat /nonexistent: no such file or directory") {
		t.Fatalf("list of a missing dir: %v", err)
	}
	if _, err := e.Move(ctx, "/tmp/nope", "/tmp/other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("move of a missing file: %v", err)
	}
	if _, err := e.MakeDir(ctx, "/tmp/x/g.txt"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("make dir over a file: %v", err)
	}
	if _, err := e.Stat(ctx, "../../etc/passwd"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a path out of the sandbox: %v", err)
	}
}

func TestEmulatorFiles(t *testing.T) {
	for _, version := range []string{"0.6.13", "0.5.0", "0.3.3"} {
		t.Run("envd "+version, func(t *testing.T) {
			m := newEnvdEmu(t, e2btest.Options{EnvdVersion: version}, NewSandbox{Secure: true})
			ctx := emuCtx(t)
			e := m.envd
			info, err := e.Upload(ctx, "/home/user/new/dir/up.txt", strings.NewReader("uploaded\n"))
			if err != nil || info != (WriteInfo{Path: "/home/user/new/dir/up.txt", Name: "up.txt", Type: "file"}) {
				t.Fatalf("upload %+v %v", info, err)
			}
			// The sandbox user can write what was uploaded, and read it back through /files.
			if _, _, _, err := m.run(t, e, "echo more >> ~/new/dir/up.txt", CommandOptions{}); err != nil {
				t.Fatal(err)
			}
			r, size, err := e.Download(ctx, "new/dir/up.txt", DownloadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(r)
			r.Close()
			if string(data) != "uploaded\nmore\n" || size != 14 {
				t.Fatalf("download %q size %d", data, size)
			}
			r, size, err = e.Download(ctx, "new/dir/up.txt", DownloadOptions{Offset: 9, Length: 4})
			if err != nil {
				t.Fatal(err)
			}
			data, _ = io.ReadAll(r)
			r.Close()
			if string(data) != "more" || size != 14 {
				t.Fatalf("partial download %q size %d", data, size)
			}
			r, size, err = e.Download(ctx, "new/dir/up.txt", DownloadOptions{Offset: 100})
			if err != nil {
				t.Fatal(err)
			}
			data, _ = io.ReadAll(r)
			r.Close()
			if len(data) != 0 || size != 14 {
				t.Fatalf("download past the end %q size %d", data, size)
			}
			if _, err := e.Upload(ctx, "new/dir/up.txt", strings.NewReader("short")); err != nil {
				t.Fatal(err)
			}
			r, _, _ = e.Download(ctx, "new/dir/up.txt", DownloadOptions{})
			data, _ = io.ReadAll(r)
			r.Close()
			if string(data) != "short" {
				t.Fatalf("an overwritten file reads %q", data)
			}
			_, _, err = e.Download(ctx, "nope", DownloadOptions{})
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "path '/home/user/nope' does not exist") {
				t.Fatalf("missing file: %v", err)
			}
			_, _, err = e.Download(ctx, "/home/user", DownloadOptions{})
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "path '/home/user' is a directory") {
				t.Fatalf("directory: %v", err)
			}
			if _, err := e.Upload(ctx, "/home/user/new", strings.NewReader("x")); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("upload onto a directory: %v", err)
			}
		})
	}
}

func TestEmulatorUploadUsesTheVersionsForm(t *testing.T) {
	for version, want := range map[string]string{"0.6.13": "application/octet-stream", "0.5.6": "multipart/form-data"} {
		m := newEnvdEmu(t, e2btest.Options{EnvdVersion: version}, NewSandbox{})
		m.srv.ResetRequests()
		if _, err := m.envd.Upload(emuCtx(t), "f", strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		reqs := m.srv.Requests()
		if len(reqs) != 1 || !strings.HasPrefix(reqs[0].Header.Get("Content-Type"), want) {
			t.Fatalf("envd %s: %d requests, content type %q", version, len(reqs), reqs[0].Header.Get("Content-Type"))
		}
	}
}

func TestEmulatorSignedURLs(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true})
	if _, err := m.envd.Upload(emuCtx(t), "s.txt", strings.NewReader("signed")); err != nil {
		t.Fatal(err)
	}
	// No routing header: a link is fetched as a browser fetches it, and the emulator finds the sandbox that signed it.
	fetch := func(method, u, body string) (int, string) {
		contentType := ""
		if method == http.MethodPost {
			contentType = "application/octet-stream"
		}
		return fetchLink(t, method, u, contentType, []byte(body))
	}
	read, err := m.envd.SignedURL("/home/user/s.txt", FileRead, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := fetch(http.MethodGet, read, ""); status != 200 || body != "signed" {
		t.Fatalf("signed read: %d %q", status, body)
	}
	if status, _ := fetch(http.MethodPost, read, "x"); status != 401 {
		t.Fatalf("a read URL wrote: %d", status)
	}
	write, _ := m.envd.WithUser("user").SignedURL("/home/user/w.txt", FileWrite, 0)
	if status, body := fetch(http.MethodPost, write, "via url"); status != 200 {
		t.Fatalf("signed write: %d %s", status, body)
	}
	if status, body := fetch(http.MethodGet, strings.Replace(read, "signature=v1_", "signature=v1_x", 1), ""); status != 401 || !strings.Contains(body, "invalid signature") {
		t.Fatalf("tampered URL: %d %s", status, body)
	}
	m.client.now = func() time.Time { return time.Now().Add(-time.Hour) }
	expired, _ := m.envd.SignedURL("/home/user/s.txt", FileRead, time.Minute)
	if status, body := fetch(http.MethodGet, expired, ""); status != 401 || !strings.Contains(body, "signature is already expired") {
		t.Fatalf("expired URL: %d %s", status, body)
	}
	// A link signed by another sandbox's token, or by none, reaches no sandbox.
	other := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true})
	foreign, _ := other.envd.SignedURL("/home/user/s.txt", FileRead, time.Minute)
	foreign = strings.Replace(foreign, other.srv.URL(), m.srv.URL(), 1)
	if status, body := fetch(http.MethodGet, foreign, ""); status != 401 || !strings.Contains(body, "invalid signature") {
		t.Fatalf("a link of a sandbox of another emulator: %d %s", status, body)
	}
	m.client.now = time.Now
	if _, err := m.client.PauseSandbox(emuCtx(t), m.sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if status, body := fetch(http.MethodGet, read, ""); status != 502 || !strings.Contains(body, "The sandbox was not found") {
		t.Fatalf("a link to a paused sandbox: %d %s", status, body)
	}
}

func TestEmulatorWrongToken(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true})
	conn := m.client.Conn(m.sb)
	conn.AccessToken = "wrong"
	e := m.client.Envd(conn)
	ctx := emuCtx(t)
	if _, err := e.Stat(ctx, "/"); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "unauthorized access") {
		t.Fatalf("RPC with a wrong token: %v", err)
	}
	if _, err := e.RunCommand(ctx, "true", CommandOptions{}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("stream with a wrong token: %v", err)
	}
	if _, _, err := e.Download(ctx, ".bashrc", DownloadOptions{}); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "access token present in header but does not match") {
		t.Fatalf("download with a wrong token: %v", err)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("health needs no token: %v", err)
	}
}

func TestEmulatorSandboxGone(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{})
	ctx := emuCtx(t)
	if err := m.envd.Health(ctx); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	streamErr := make(chan error, 1)
	go func() {
		_, err := m.envd.RunCommand(context.Background(), "sleep 30", CommandOptions{OnStart: func(uint32) { close(started) }})
		streamErr <- err
	}()
	waitfor.Recv(t, started, 30*time.Second, "the command to start")
	if _, err := m.client.PauseSandbox(ctx, m.sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := waitfor.Recv(t, streamErr, 30*time.Second, "the stream of the paused sandbox to end"); !errors.Is(err, ErrStreamCut) || !errors.Is(err, errStreamCut) {
		t.Fatalf("the stream of a paused sandbox: %v (%T), want it cut", err, err)
	}
	err := m.envd.Health(ctx)
	if !errors.Is(err, ErrSandboxGone) || !strings.Contains(err.Error(), "is not running (paused, killed or timed out)") {
		t.Fatalf("health of a paused sandbox: %v", err)
	}
	if _, err := m.envd.Stat(ctx, "/"); !errors.Is(err, ErrSandboxGone) {
		t.Fatalf("stat of a paused sandbox: %v", err)
	}
	if _, _, err := m.client.ConnectSandbox(ctx, m.sb.SandboxID, 300); err != nil {
		t.Fatal(err)
	}
	list, err := m.envd.ListProcesses(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("after resume: %+v %v, want the command still there", list, err)
	}
	if err := m.client.KillSandbox(ctx, m.sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.envd.Download(ctx, ".bashrc", DownloadOptions{}); !errors.Is(err, ErrSandboxGone) {
		t.Fatalf("download from a killed sandbox: %v", err)
	}
}

func TestEmulatorStreamCutFault(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{})
	m.srv.SetFaults(e2btest.Faults{CutStreamAfterFrames: 2})
	_, _, _, err := m.run(t, m.envd, "echo a; echo b; echo c", CommandOptions{})
	if !errors.Is(err, ErrStreamCut) || !errors.Is(err, errStreamCut) {
		t.Fatalf("err = %v (%T), want the cut reported", err, err)
	}
}

// Every kind of envd call goes through a Go reverse proxy in front of envd, as E2B's edge is one, even when the
// proxy is slow to finish reading request bodies: answers to bodies of declared length would be cut (newRequest).
func TestEmulatorThroughAnEdgeProxy(t *testing.T) {
	m := newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true})
	proxy, err := e2btest.NewEdgeProxy(e2btest.EdgeProxyOptions{Target: m.srv.URL(), BodyLag: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: m.srv.URL(), SandboxURL: proxy.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Envd(c.Conn(m.sb))
	ctx := emuCtx(t)
	for i := range 3 {
		res, stdout, _, err := m.run(t, e, fmt.Sprintf("echo run-%d", i), CommandOptions{})
		if err != nil || res.ExitCode != 0 || stdout != fmt.Sprintf("run-%d\n", i) {
			t.Fatalf("command %d through the proxy: %+v %q %v", i, res, stdout, err)
		}
		if _, err := e.ListProcesses(ctx); err != nil {
			t.Fatalf("List through the proxy: %v", err)
		}
		if _, err := e.Upload(ctx, "/home/user/f", strings.NewReader("content")); err != nil {
			t.Fatalf("upload through the proxy: %v", err)
		}
		if _, err := e.Stat(ctx, "/home/user/f"); err != nil {
			t.Fatalf("Stat through the proxy: %v", err)
		}
	}
}
