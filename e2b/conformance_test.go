package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// The conformance suite: the same assertions against the emulator and against E2B's real envd (shared/envd
// beside the repository), for the behaviour of processes that a terminal user relies on. The real half is
// skipped, with a line saying why, where the daemon is absent.

// realEnvd is one real envd for the whole package run (starting one takes seconds); tests keep apart by the
// unique commands and paths they use.
var realEnvd struct {
	once sync.Once
	envd *e2btest.RealEnvd
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if realEnvd.envd != nil {
		realEnvd.envd.Stop()
	}
	os.Exit(code)
}

// conformance runs f against each target: the emulator (a new sandbox) and the real envd.
func conformance(t *testing.T, f func(t *testing.T, e *Envd)) {
	t.Helper()
	t.Run("emulator", func(t *testing.T) {
		t.Parallel()
		f(t, newEnvdEmu(t, e2btest.Options{}, NewSandbox{Secure: true}).envd)
	})
	t.Run("envd", func(t *testing.T) {
		t.Parallel()
		realEnvd.once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			realEnvd.envd, realEnvd.err = e2btest.StartRealEnvd(ctx, nil)
		})
		if errors.Is(realEnvd.err, e2btest.ErrNoRealEnvd) {
			why := "not run against the real envd: " + realEnvd.err.Error()
			if e2btest.RealEnvdExpected() {
				optional.Missing(t, why)
			}
			optional.Skip(t, why)
		}
		if realEnvd.err != nil {
			t.Fatal(realEnvd.err)
		}
		r := realEnvd.envd
		c, err := NewClient(Config{APIKey: testAPIKey, APIURL: r.URL, SandboxURL: r.URL})
		if err != nil {
			t.Fatal(err)
		}
		f(t, c.Envd(SandboxConn{ID: "realenvd", EnvdVersion: r.Version, AccessToken: r.AccessToken}))
	})
}

// unique returns a name no other test (nor another run on this host) uses: the real envd shares /tmp, /home/user
// and its process table between tests.
func unique(t *testing.T) string {
	return fmt.Sprintf("t%d%d", time.Now().UnixNano()%1e9, os.Getpid())
}

// envdNiceness is the line envd's own wrapper writes first on a command's stderr where envd runs with a raised
// niceness (under `nice`, as a shared test machine may run it; on E2B too, were its envd niced): the wrapper's
// `nice -n` that brings the command back to niceness 0 is refused to the unprivileged user, and the command runs
// regardless. The server passes it on as it passes any stderr (it cannot tell it from a command's own line); the
// tests, which compare stderr to the byte, leave it out.
var envdNiceness = regexp.MustCompile(`^(/usr/bin/)?nice: cannot set niceness: [^\n]*\n`)

// withoutEnvdNiceness is a command's stderr without envd's niceness line (see envdNiceness).
func withoutEnvdNiceness(stderr string) string { return envdNiceness.ReplaceAllString(stderr, "") }

// sh runs a command and returns its stdout, failing the test on an error or a non-zero exit.
func sh(t *testing.T, e *Envd, command string) string {
	t.Helper()
	var out strings.Builder
	res, err := e.RunCommand(emuCtx(t), command, CommandOptions{Timeout: 20 * time.Second, OnOutput: func(k EventKind, d []byte) {
		if k == EventStdout {
			out.Write(d)
		}
	}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %+v %v (stdout %q)", command, res, err, out.String())
	}
	return out.String()
}

// running lists the processes whose command line contains s.
func running(t *testing.T, e *Envd, s string) string {
	t.Helper()
	list, err := matching(emuCtx(t), e, s)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// matching lists the processes whose command line contains s; unlike running, it may be called from any goroutine.
func matching(ctx context.Context, e *Envd, s string) (string, error) {
	// The pattern is built in the shell, so that this command's own line does not contain s.
	half := len(s) / 2
	command := fmt.Sprintf("ps -eo pid=,args= | grep -F -- \"%s\"\"%s\" | grep -v grep || true", s[:half], s[half:])
	var out strings.Builder
	res, err := e.RunCommand(ctx, command, CommandOptions{Timeout: 20 * time.Second, OnOutput: func(k EventKind, d []byte) {
		if k == EventStdout {
			out.Write(d)
		}
	}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%s: %+v", command, res)
	}
	return out.String(), err
}

// whenRunning calls f once a process whose command line contains s runs, or once ctx ends.
func whenRunning(ctx context.Context, e *Envd, s string, f func()) {
	go func() {
		defer f()
		for ctx.Err() == nil {
			if list, err := matching(ctx, e, s); err != nil || list != "" {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// killAll kills the processes whose command line contains s.
func killAll(t *testing.T, e *Envd, s string) {
	t.Helper()
	half := len(s) / 2
	sh(t, e, fmt.Sprintf("pkill -KILL -f -- \"%s\"\"%s\" || true", s[:half], s[half:]))
}

// waitGone waits until no process's command line contains s.
func waitGone(t *testing.T, e *Envd, s string) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, "no process of "+s+" to run", func() bool { return running(t, e, s) == "" })
}

// stopCases are commands whose whole process tree a stop must end: a sequence, a pipeline, and a shell that
// waits for its own background job. %s is a unique sleep duration that finds the processes again.
var stopCases = []struct{ name, command string }{
	{"sequence", "sleep %s; echo late > late-%[1]s"},
	{"pipeline", "sleep %s | cat"},
	{"waited job", "sh -c 'sleep %s & wait'"},
}

func TestConformanceTimeoutStopsTheWholeTree(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		for i, tc := range stopCases {
			t.Run(tc.name, func(t *testing.T) {
				dur := fmt.Sprintf("30.%d%d", i, time.Now().UnixNano()%1e6)
				start := time.Now()
				res, err := e.RunCommand(emuCtx(t), fmt.Sprintf(tc.command, dur), CommandOptions{Timeout: 500 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if !res.TimedOut || res.ExitCode != -1 || res.Exited {
					t.Fatalf("result %+v after %v", res, time.Since(start))
				}
				waitGone(t, e, "sleep "+dur)
			})
		}
	})
}

func TestConformanceCancelStopsTheWholeTree(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		for i, tc := range stopCases {
			t.Run(tc.name, func(t *testing.T) {
				dur := fmt.Sprintf("30.%d%d", i, time.Now().UnixNano()%1e6)
				ctx, cancel := context.WithCancel(emuCtx(t))
				defer cancel()
				// The cancel comes once the whole tree runs: a timer could fire before a loaded machine has even
				// started it.
				whenRunning(emuCtx(t), e, "sleep "+dur, cancel)
				res, err := e.RunCommand(ctx, fmt.Sprintf(tc.command, dur), CommandOptions{})
				if !errors.Is(err, context.Canceled) || res.PID == 0 {
					t.Fatalf("res %+v err %v", res, err)
				}
				waitGone(t, e, "sleep "+dur)
			})
		}
	})
}

// A call given up while envd's answer to Start is on its way (the command runs, its pid is not known yet) still
// kills the command: the start event is awaited for its pid. The answer is held back until the cancel, as a slow
// network or a busy proxy holds it.
func TestConformanceCancelBeforeTheStartEvent(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		dur := fmt.Sprintf("30.8%d", time.Now().UnixNano()%1e6)
		hold := &holdFirstStart{next: http.DefaultTransport, release: make(chan struct{})}
		cfg := e.client.cfg
		cfg.HTTPClient = &http.Client{Transport: hold}
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		held := c.Envd(e.conn)

		ctx, cancel := context.WithCancel(emuCtx(t))
		defer cancel()
		type result struct {
			res CommandResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := held.RunCommand(ctx, "sleep "+dur, CommandOptions{})
			done <- result{res, err}
		}()
		waitfor.Until(t, 20*time.Second, "the command to start", func() bool { return running(t, e, "sleep "+dur) != "" })
		cancel()
		close(hold.release)
		select {
		case r := <-done:
			if !errors.Is(r.err, context.Canceled) || r.res.PID == 0 {
				t.Fatalf("res %+v err %v", r.res, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the cancelled call did not return")
		}
		waitGone(t, e, "sleep "+dur)
	})
}

// holdFirstStart is a transport that holds the first answer to Process/Start (its headers are in, its events
// not yet read) until release is closed. A request whose context has ended by then fails as it would have
// without the hold.
type holdFirstStart struct {
	next    http.RoundTripper
	release chan struct{}
	once    sync.Once
}

func (h *holdFirstStart) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/process.Process/Start") {
		return resp, err
	}
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return resp, nil
	}
	<-h.release
	if err := req.Context().Err(); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

func TestConformanceBackgroundJobDoesNotHoldTheCall(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		t.Run("without a log", func(t *testing.T) { backgroundJobDoesNotHoldTheCall(t, e, "") })
		t.Run("with a log", func(t *testing.T) { backgroundJobDoesNotHoldTheCall(t, e, "/tmp/"+unique(t)) })
	})
}

func backgroundJobDoesNotHoldTheCall(t *testing.T, e *Envd, logDir string) {
	dur := fmt.Sprintf("30.9%d", time.Now().UnixNano()%1e6)
	// The late job writes once the command is over: once its shell ($$, which writes the exit marker as it
	// exits) has exited, whether envd has reaped it yet (a zombie, state Z) or not. A fixed delay would let a
	// loaded machine run the job's write before the shell's exit.
	late := `(while s=$(cut -d' ' -f3 /proc/$$/stat 2>/dev/null) && [ "$s" != Z ]; do sleep 0.05; done; echo late; echo late >&2) &`
	var stdout, stderr strings.Builder
	start := time.Now()
	res, err := e.RunCommand(emuCtx(t), "sleep "+dur+" & "+late+" echo started", CommandOptions{
		Timeout: 20 * time.Second,
		LogDir:  logDir,
		OnOutput: func(k EventKind, d []byte) {
			if k == EventStdout {
				stdout.Write(d)
			} else {
				stderr.Write(d)
			}
		},
	})
	// The call did not wait for the job: it was not cut by the timeout (the job outlives it), and the job
	// still runs after it.
	if err != nil || res.ExitCode != 0 || !res.Exited || res.TimedOut {
		t.Fatalf("result %+v %v after %v", res, err, time.Since(start))
	}
	if stdout.String() != "started\n" || withoutEnvdNiceness(stderr.String()) != "" {
		t.Fatalf("stdout %q, stderr %q; want only the shell's own line", stdout.String(), stderr.String())
	}
	if running(t, e, "sleep "+dur) == "" {
		t.Fatal("the background job did not survive its shell")
	}
	time.Sleep(500 * time.Millisecond)
	if out := sh(t, e, "echo next"); out != "next\n" {
		t.Fatalf("the next command's output: %q", out)
	}
	if got, err := e.SignalTree(emuCtx(t), res.PID, 0); err != nil || got != TreeKilled {
		t.Fatalf("SignalTree: %v %v", got, err)
	}
	waitGone(t, e, "sleep "+dur)
}

// A command with a log directory writes, by itself in the sandbox, all its output to its log from the first byte
// (the same bytes the stream carried, all of them before the stream's end marker), its command line and its exit
// code: what a caller that went away reads there later.
func TestConformanceCommandLog(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		dir := "/tmp/" + unique(t)
		for _, tc := range []struct{ command, stdout, stderr, exit string }{
			{"echo out; echo err >&2; exit 3", "out\n", "err\n", "3\n"},
			{"seq 1 100000", seqLines(100000), "", "0\n"},
			{"printf 'no newline'", "no newline", "", "0\n"},
			// None of the variables of the logging shell's script reaches the command.
			{"echo \"[$r$y$p$q$l$t]\"", "[]\n", "", "0\n"},
		} {
			var stdout, stderr strings.Builder
			res, err := e.RunCommand(emuCtx(t), tc.command, CommandOptions{Timeout: 20 * time.Second, LogDir: dir, OnOutput: func(k EventKind, d []byte) {
				if k == EventStdout {
					stdout.Write(d)
				} else {
					stderr.Write(d)
				}
			}})
			if err != nil || stdout.String() != tc.stdout || withoutEnvdNiceness(stderr.String()) != tc.stderr {
				t.Fatalf("%s: %+v %v, stdout %d bytes (want %d), stderr %q", tc.command, res, err, stdout.Len(), len(tc.stdout), stderr.String())
			}
			logFile, exitFile := BackgroundFiles(dir, res.PID)
			logged := sh(t, e, "cat "+logFile)
			if len(logged) != len(tc.stdout)+len(tc.stderr) || !strings.Contains(logged, tc.stdout) || !strings.Contains(logged, tc.stderr) {
				t.Fatalf("%s: the log holds %d bytes (%.100q), want stdout and stderr (%d bytes)", tc.command, len(logged), logged, len(tc.stdout)+len(tc.stderr))
			}
			if got := sh(t, e, "cat "+exitFile); got != tc.exit {
				t.Fatalf("%s: exit file %q, want %q", tc.command, got, tc.exit)
			}
			if got := sh(t, e, "cat "+CommandFile(dir, res.PID)); got != tc.command {
				t.Fatalf("%s: command file %q", tc.command, got)
			}
		}
		// A directory that cannot be made leaves the command to run without a log.
		if res, err := e.RunCommand(emuCtx(t), "echo still", CommandOptions{LogDir: "/proc/nope", OnOutput: func(EventKind, []byte) {}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("no log: %+v %v", res, err)
		}
	})
}

// seqLines is what seq 1 n prints.
func seqLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestConformanceExitCodesAndOutput(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		for _, tc := range []struct {
			command, stdout, stderr string
			end                     ProcessEnd
		}{
			{"echo out; echo err >&2; exit 3", "out\n", "err\n", ProcessEnd{ExitCode: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}},
			{"printf 'no newline'", "no newline", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
			{"whoami; pwd", "user\n/home/user\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
			// A shell killed outright cannot mark its exit: envd's end says how it ended, as for E2B's SDKs.
			{"kill -9 $$", "", "", ProcessEnd{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}},
			{"kill $$", "", "", ProcessEnd{ExitCode: 143, Exited: true, Status: "exit status 143", Error: "exit status 143"}},
			{"set -eu; false", "", "", ProcessEnd{ExitCode: 1, Exited: true, Status: "exit status 1", Error: "exit status 1"}},
			{"echo $1$2$3$4$c$m$d$t$o$e$#", "0\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
			{"echo $0 $SHLVL", "/bin/bash 1\n", "", ProcessEnd{Exited: true, Status: "exit status 0"}},
			{"nosuchcommand-x", "", "/bin/bash: line 1: nosuchcommand-x: command not found\n", ProcessEnd{ExitCode: 127, Exited: true, Status: "exit status 127", Error: "exit status 127"}},
		} {
			var stdout, stderr strings.Builder
			res, err := e.RunCommand(emuCtx(t), tc.command, CommandOptions{Timeout: 20 * time.Second, OnOutput: func(k EventKind, d []byte) {
				if k == EventStdout {
					stdout.Write(d)
				} else {
					stderr.Write(d)
				}
			}})
			if err != nil || res.ProcessEnd != tc.end || stdout.String() != tc.stdout || withoutEnvdNiceness(stderr.String()) != tc.stderr {
				t.Errorf("%s: %+v %v, stdout %q stderr %q", tc.command, res, err, stdout.String(), stderr.String())
			}
		}
	})
}

// A command that replaces its shell (exec) or sets an EXIT trap of its own leaves the shell no way to mark its
// exit: the stream's end says how it ended, as for E2B's SDKs, and the result says it was not marked.
func TestConformanceUnmarkedEnd(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		for _, tc := range []struct {
			command, stdout string
			code            int
			unmarked        bool
		}{
			{"exec sh -c 'echo replaced; exit 5'", "replaced\n", 5, true},
			{"trap 'echo bye' EXIT; exit 4", "bye\n", 4, true},
			{"echo marked; exit 6", "marked\n", 6, false},
		} {
			var stdout strings.Builder
			res, err := e.RunCommand(emuCtx(t), tc.command, CommandOptions{Timeout: 20 * time.Second, LogDir: "/tmp/" + unique(t),
				OnOutput: func(k EventKind, d []byte) {
					if k == EventStdout {
						stdout.Write(d)
					}
				}})
			if err != nil || res.ExitCode != tc.code || !res.Exited || res.Unmarked != tc.unmarked || stdout.String() != tc.stdout {
				t.Errorf("%s: %+v %v, stdout %q", tc.command, res, err, stdout.String())
			}
		}
	})
}

func TestConformanceBackgroundServer(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		if sh(t, e, "command -v python3 || true") == "" {
			optional.Missing(t, "python3 (the web server of this test) is not installed")
		}
		name := unique(t)
		port := 20000 + time.Now().UnixNano()%20000
		server := fmt.Sprintf("exec python3 -m http.server %d --bind 127.0.0.1 --directory /tmp/%s", port, name)
		pid, err := e.StartBackground(emuCtx(t), server, BackgroundOptions{LogDir: "/tmp/" + name, Tag: "conf-" + name})
		if err != nil {
			t.Fatal(err)
		}
		log, exit := BackgroundFiles("/tmp/"+name, pid)
		sh(t, e, "echo hello > /tmp/"+name+"/hello.txt")
		// The next command reaches the server at 127.0.0.1: one network for the whole sandbox.
		fetch := fmt.Sprintf("for i in $(seq 100); do python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(\"http://127.0.0.1:%d/hello.txt\").read().decode())' 2>/dev/null && exit 0; sleep 0.1; done; exit 1", port)
		if out := sh(t, e, fetch); out != "hello\n" {
			t.Fatalf("fetched %q", out)
		}
		list, err := e.ListBackground(emuCtx(t), "conf-"+name)
		if err != nil || len(list) != 1 || list[0].PID != pid || list[0].Command != server || !list[0].Background || list[0].PTY {
			t.Fatalf("list %+v %v", list, err)
		}
		if got, err := e.SignalTree(emuCtx(t), pid, 5*time.Second); err != nil || got != TreeTermed {
			t.Fatalf("stop: %v %v", got, err)
		}
		waitGone(t, e, fmt.Sprintf("http.server %d", port))
		if list, err := e.ListBackground(emuCtx(t), "conf-"+name); err != nil || len(list) != 0 {
			t.Fatalf("after stop: %+v %v", list, err)
		}
		if logged := sh(t, e, "cat "+log); !strings.Contains(logged, "GET /hello.txt") {
			t.Fatalf("log %q", logged)
		}
		// Stopped by SIGTERM, which the command's shell reports as 128+15.
		if code := sh(t, e, "cat "+exit); code != "143\n" {
			t.Fatalf("exit file after SIGTERM: %q", code)
		}
		if got, err := e.SignalTree(emuCtx(t), pid, time.Second); err != nil || got != TreeGone {
			t.Fatalf("stop again: %v %v", got, err)
		}
		if _, err := e.StartBackground(emuCtx(t), "true", BackgroundOptions{LogDir: "/proc/nope"}); err == nil || !strings.Contains(err.Error(), "could not start") {
			t.Fatalf("unwritable log: %v", err)
		}
	})
}

// A background command reads the input sent to it, on a pipe or on a terminal, after the stream that started it
// closed, and leaves its exit code in its exit file.
func TestConformanceBackgroundInput(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		dir := "/tmp/" + unique(t)
		readLog := func(pid uint32, want string) string {
			t.Helper()
			log, _ := BackgroundFiles(dir, pid)
			var got string
			waitfor.Until(t, 10*time.Second, fmt.Sprintf("the log of %d to hold %q", pid, want), func() bool {
				got = sh(t, e, "cat "+log)
				return strings.Contains(got, want)
			})
			return got
		}
		exitCode := func(pid uint32) string {
			t.Helper()
			_, exit := BackgroundFiles(dir, pid)
			waitFor := "for i in $(seq 100); do [ -s " + exit + " ] && exec cat " + exit + "; sleep 0.1; done"
			return sh(t, e, waitFor)
		}

		pid, err := e.StartBackground(emuCtx(t), "read -p 'name? ' n; echo hello $n; exit 3", BackgroundOptions{LogDir: dir, Tag: "conf-in"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SendStdin(emuCtx(t), pid, []byte("ada\n")); err != nil {
			t.Fatal(err)
		}
		readLog(pid, "hello ada\n")
		if code := exitCode(pid); code != "3\n" {
			t.Fatalf("exit file %q", code)
		}

		pid, err = e.StartBackground(emuCtx(t), "cat; echo closed", BackgroundOptions{LogDir: dir, Tag: "conf-close"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SendStdin(emuCtx(t), pid, []byte("piped\n")); err != nil {
			t.Fatal(err)
		}
		if err := e.CloseStdin(emuCtx(t), pid); err != nil {
			t.Fatal(err)
		}
		if got := readLog(pid, "closed\n"); got != "piped\nclosed\n" {
			t.Fatalf("log %q", got)
		}

		// On a terminal: the prompt reads /dev/tty, which only a process with a controlling terminal has.
		pid, err = e.StartBackground(emuCtx(t), "test -t 0 && echo tty; read -r n </dev/tty; echo hello $n", BackgroundOptions{LogDir: dir, Tag: "conf-pty", PTY: true})
		if err != nil {
			t.Fatal(err)
		}
		list, err := e.ListBackground(emuCtx(t), "conf-pty")
		if err != nil || len(list) != 1 || list[0].PID != pid || !list[0].PTY || !list[0].Background {
			t.Fatalf("list %+v %v", list, err)
		}
		readLog(pid, "tty\n")
		if err := e.SendStdin(emuCtx(t), pid, []byte("x\n")); err == nil || !strings.Contains(err.Error(), "500 internal): error writing to stdin: tty assigned to process — input should be written to the pty, not the stdin") {
			t.Fatalf("stdin input to a terminal's process: %v", err)
		}
		if err := e.CloseStdin(emuCtx(t), pid); err == nil || !strings.Contains(err.Error(), "500 unknown): error closing stdin: cannot close stdin for PTY process — send Ctrl+D (0x04) instead") {
			t.Fatalf("closing a terminal's stdin: %v", err)
		}
		if err := e.SendPTYInput(emuCtx(t), pid, []byte("grace\r")); err != nil {
			t.Fatal(err)
		}
		readLog(pid, "hello grace\n")
		if code := exitCode(pid); code != "0\n" {
			t.Fatalf("exit file %q", code)
		}
	})
}

// What envd itself does with processes (docs/e2b.md, "Processes in envd"), which the emulator must do too.

// rawStart starts a process through envd's Start directly (no session of its own, no exit marker) and returns
// its pid and a channel with how the stream ended.
func rawStart(t *testing.T, e *Envd, ctx context.Context, opts StartOptions) (uint32, <-chan error) {
	t.Helper()
	pidc := make(chan uint32, 1)
	done := make(chan error, 1)
	go func() {
		end, err := e.Start(ctx, opts, func(ev ProcessEvent) {
			if ev.Kind == EventStart {
				pidc <- ev.PID
			}
		})
		if err == nil && (end.ExitCode != 0 || !end.Exited) {
			err = fmt.Errorf("ended %+v", end)
		}
		done <- err
	}()
	select {
	case pid := <-pidc:
		return pid, done
	case err := <-done:
		t.Fatalf("ended before it started: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no start event")
	}
	return 0, nil
}

func bashC(script string) StartOptions {
	return StartOptions{Process: ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", script}}}
}

func TestConformanceSendSignalReachesOnePid(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		dur := fmt.Sprintf("30.8%d", time.Now().UnixNano()%1e6)
		pid, done := rawStart(t, e, emuCtx(t), bashC("sleep "+dur+"; echo x"))
		waitfor.Until(t, 10*time.Second, "the sleep to start", func() bool { return running(t, e, "sleep "+dur) != "" })
		if err := e.SendSignal(emuCtx(t), pid, SIGKILL); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if running(t, e, "sleep "+dur) == "" {
			t.Fatal("SendSignal reached more than the one pid")
		}
		killAll(t, e, "sleep "+dur)
		if err := waitfor.Recv(t, done, 30*time.Second, "the killed shell's stream to end"); err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("the shell ended %v, want killed", err)
		}
	})
}

func TestConformanceDeadlineKillsOnePid(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		dur := fmt.Sprintf("30.7%d", time.Now().UnixNano()%1e6)
		opts := bashC("sleep " + dur + "; echo x")
		opts.Timeout = time.Second
		start := time.Now()
		_, done := rawStart(t, e, emuCtx(t), opts)
		err := waitfor.Recv(t, done, 30*time.Second, "the stream to end at its deadline")
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != "deadline_exceeded" {
			t.Fatalf("stream ended %v after %v, want deadline_exceeded at the deadline", err, time.Since(start))
		}
		if running(t, e, "sleep "+dur) == "" {
			t.Fatal("the deadline killed more than the one pid")
		}
		killAll(t, e, "sleep "+dur)
	})
}

func TestConformanceClosingTheStreamLeavesTheProcess(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		ctx, cancel := context.WithCancel(emuCtx(t))
		pid, done := rawStart(t, e, ctx, bashC("sleep 30"))
		cancel()
		waitfor.Recv(t, done, 30*time.Second, "the closed stream to end")
		time.Sleep(200 * time.Millisecond)
		list, err := e.ListProcesses(emuCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range list {
			found = found || p.PID == pid
		}
		if !found {
			t.Fatalf("process %d is gone from %+v", pid, list)
		}
		if err := e.SendSignal(emuCtx(t), pid, SIGKILL); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConformanceStreamEndsWhenThePipesClose(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		// The job writes its mark last, just before it ends and its copy of the pipes closes.
		mark := fmt.Sprintf("/tmp/job-done-%d", time.Now().UnixNano())
		_, done := rawStart(t, e, emuCtx(t), bashC("(sleep 1.5; echo done > "+mark+") & echo started"))
		if err := waitfor.Recv(t, done, 30*time.Second, "the stream to end"); err != nil {
			t.Fatalf("stream ended %v", err)
		}
		body, _, err := e.Download(emuCtx(t), mark, DownloadOptions{})
		if err != nil {
			t.Fatalf("the stream ended before the background job did (no %s): %v", mark, err)
		}
		defer body.Close()
		if got, _ := io.ReadAll(body); string(got) != "done\n" {
			t.Fatalf("%s holds %q", mark, got)
		}
	})
}

// envd reads a request's integers, bytes and enums in each form proto3 JSON allows (an integer as a string or in
// exponent form, bytes unpadded, an enum by number) and refuses a member of the wrong JSON type as an invalid
// argument; the emulator reads the shared messages alike.
func TestConformanceRequestsInEachProto3Form(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		ctx := emuCtx(t)
		dir := "/tmp/" + unique(t)
		sh(t, e, "mkdir -p "+dir+"/sub")
		for _, depth := range []string{`1`, `"1"`, `1e0`, `"1e0"`} {
			var out envd.ListDirResponse
			req := json.RawMessage(`{"path":"` + dir + `","depth":` + depth + `}`)
			err := e.unary(ctx, "envd ListDir", "filesystem.Filesystem/ListDir", req, &out, true)
			if err != nil || len(out.Entries) != 1 || out.Entries[0].Name != "sub" {
				t.Errorf("ListDir with depth %s: %+v, %v", depth, out, err)
			}
		}

		opts := bashC("read line; echo \"got $line\" > " + dir + "/got; sleep 60")
		opts.Stdin = true
		pid, done := rawStart(t, e, ctx, opts)
		input := json.RawMessage(fmt.Sprintf(`{"process":{"pid":"%d"},"input":{"stdin":"aGkKCg"}}`, pid))
		if err := e.unary(ctx, "envd SendInput", "process.Process/SendInput", input, nil, false); err != nil {
			t.Fatalf("SendInput with the pid as a string: %v", err)
		}
		waitfor.Until(t, 10*time.Second, "the shell to read its input", func() bool {
			return sh(t, e, "cat "+dir+"/got 2>/dev/null || true") == "got hi\n"
		})
		var apiErr *APIError
		wrong := json.RawMessage(fmt.Sprintf(`{"process":{"pid":%d},"signal":true}`, pid))
		err := e.unary(ctx, "envd SendSignal", "process.Process/SendSignal", wrong, nil, false)
		if !errors.As(err, &apiErr) || apiErr.Code != "invalid_argument" {
			t.Errorf("SendSignal with a signal of the wrong type: %v, want invalid_argument", err)
		}
		byNumber := json.RawMessage(fmt.Sprintf(`{"process":{"pid":%d},"signal":9}`, pid))
		if err := e.unary(ctx, "envd SendSignal", "process.Process/SendSignal", byNumber, nil, false); err != nil {
			t.Fatalf("SendSignal with SIGKILL by number: %v", err)
		}
		if err := waitfor.Recv(t, done, 30*time.Second, "the killed shell's stream to end"); err == nil ||
			!strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("the shell ended %v, want killed", err)
		}
	})
}
