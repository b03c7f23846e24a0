package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Start-up of the binary to its first tools/list answer: what a user waits for when an assistant launches the
// server. Each iteration starts a fresh process (state store, policy, keyring) and closes it.
func BenchmarkStartupToFirstToolsList(b *testing.B) {
	x := newH(b)
	requireKeyring(b)
	owner := x.owner("bench")
	args := x.serveArgs(owner, "bench")
	// One run outside the timer creates the state store and its data key, which later starts only open.
	x.startStdio(clientOpts{}, args...).Close()
	b.ResetTimer()
	for range b.N {
		s := x.startStdio(clientOpts{}, args...)
		if _, err := s.ListTools(b.Context(), mcp.ListToolsRequest{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// Start-up of the binary to its answer to initialize, on each backend: a client that waits long for it picks an
// older protocol or starts without the server's tools. Each iteration starts a fresh process and closes it; the
// local backend's checks of this machine (bubblewrap, Jupyter) must not be in what is measured.
func BenchmarkStartToInitialize(b *testing.B) {
	x := newH(b)
	for _, backend := range []struct {
		name string
		args func() []string
	}{
		{"local", func() []string {
			return []string{"serve", "--backend", "local", "--owner", x.owner("local"), "--state-dir", x.path("state-local")}
		}},
		{"e2b", func() []string {
			requireKeyring(b)
			return x.serveArgs(x.owner("bench"), "bench")
		}},
	} {
		b.Run(backend.name, func(b *testing.B) {
			args := backend.args()
			x.startStdio(clientOpts{}, args...).Close() // makes the state directory, which later starts only open
			b.ResetTimer()
			for range b.N {
				s := x.startStdio(clientOpts{}, args...) // returns once initialize is answered
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// e2b_exec of `true` through MCP (stdio, policy, lease, audit, keyring, envd) against the e2b client calling
// envd directly: the ratio is the server's overhead on the cheapest command.
func BenchmarkExecTrueMCPvsDirect(b *testing.B) {
	x := newH(b)
	owner := x.owner("bench")
	key := x.login(owner)
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "bench")...)
	id := create(b, s.Client, map[string]any{"title": "bench"})
	sb, _ := the.emu.Sandbox(id)
	ec, err := e2b.NewClient(e2b.Config{APIKey: key, APIURL: the.emu.URL(), SandboxURL: the.emu.URL()})
	if err != nil {
		b.Fatal(err)
	}
	envd := ec.Envd(e2b.SandboxConn{ID: id, EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken})
	args := map[string]any{"sandbox_id": id, "command": "true"}
	ctx := b.Context()

	// Warm both paths (connections, first process start) before measuring.
	ok(b, s.Client, "e2b_exec", args)
	if _, err := envd.RunCommand(ctx, "true", e2b.CommandOptions{}); err != nil {
		b.Fatal(err)
	}

	var viaMCP, direct time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		out := ok(b, s.Client, "e2b_exec", args)
		t1 := time.Now()
		res, err := envd.RunCommand(ctx, "true", e2b.CommandOptions{})
		t2 := time.Now()
		if err != nil || res.ExitCode != 0 || num(out, "exit_code") != 0 {
			b.Fatalf("exec true: mcp %v, direct %+v %v", out, res, err)
		}
		viaMCP += t1.Sub(t0)
		direct += t2.Sub(t1)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(viaMCP.Nanoseconds())/n, "mcp-ns/exec")
	b.ReportMetric(float64(direct.Nanoseconds())/n, "direct-ns/exec")
	b.ReportMetric(float64(viaMCP)/float64(direct), "mcp/direct")
}

// e2b_create_sandbox then e2b_manage_sandbox delete through MCP (the built binary over stdio) against the e2b
// client's CreateSandbox and KillSandbox on the same emulator, in turn: the ratio is the server's overhead on a
// sandbox's whole life, and server-cpu-ms/pair what the server spends on it.
func BenchmarkCreateKillMCPvsDirect(b *testing.B) {
	x := newH(b)
	owner := x.owner("bench")
	key := x.login(owner)
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "bench", "--policy", x.allowAll())...)
	ec, err := e2b.NewClient(e2b.Config{APIKey: key, APIURL: the.emu.URL(), SandboxURL: the.emu.URL()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	viaMCP := func() {
		id := create(b, s.Client, map[string]any{"title": "bench"})
		ok(b, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
	}
	direct := func() {
		sb, err := ec.CreateSandbox(ctx, e2b.NewSandbox{TemplateID: "base"})
		if err != nil {
			b.Fatal(err)
		}
		if err := ec.KillSandbox(ctx, sb.SandboxID); err != nil {
			b.Fatal(err)
		}
	}
	viaMCP() // warm both paths
	direct()
	var mcpTimes, directTimes []time.Duration
	cpu0 := cpuTime(b, s.cmd.Process.Pid)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		viaMCP()
		t1 := time.Now()
		direct()
		mcpTimes, directTimes = append(mcpTimes, t1.Sub(t0)), append(directTimes, time.Since(t1))
	}
	b.StopTimer()
	serverCPU := cpuTime(b, s.cmd.Process.Pid) - cpu0
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(median(mcpTimes)), "mcp-ms")
	b.ReportMetric(ms(median(directTimes)), "direct-ms")
	b.ReportMetric(float64(median(mcpTimes))/float64(median(directTimes)), "mcp/direct")
	b.ReportMetric(ms(serverCPU)/float64(b.N), "server-cpu-ms/pair")
	if raceEnabled {
		b.Log("the binary is built with -race, which slows the server several times; `make bench` builds it without")
	}
}

// A 1 MiB e2b_write_file through MCP (the built binary over stdio, driven by the mcp-go client: encoding the
// call, the server's transport, policy, audit and tool, the upload to envd, the answer) against E2B's own JS SDK
// (npm e2b, connected to the sandbox with Sandbox.connect as its users do) writing the same bytes with
// files.write to the same sandbox of the same emulator. mcp/sdk is the ratio.
func BenchmarkWriteFile1MiBMCPvsJSSDK(b *testing.B) {
	node := requireNode(b)
	_, err := os.Stat(filepath.Join("js", "node_modules", "e2b", "package.json"))
	requireEnv(b, err == nil, "E2B's JS SDK is not installed (run npm ci in tests/js)")
	x := newH(b)
	owner := x.owner("bench")
	key := x.login(owner)
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "bench")...)
	id := create(b, s.Client, map[string]any{"title": "bench"})
	sb, _ := the.emu.Sandbox(id)

	content := textOfSize(1 << 20)
	contentFile := x.path("content.txt")
	if err := os.WriteFile(contentFile, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
	const mcpPath, sdkPath = "/home/user/bench/mcp.txt", "/home/user/bench/sdk.txt"
	sdk := startSDKClient(b, x, the.emu, node, key, id, sdkPath, contentFile)
	args := map[string]any{"sandbox_id": id, "path": mcpPath, "content": content}

	// Warm both paths (connections, the parent directory, the JIT) before measuring.
	for range 3 {
		ok(b, s.Client, "e2b_write_file", args)
		sdk.write(b)
	}

	var viaMCP, viaSDK time.Duration
	cpu0 := cpuTime(b, s.cmd.Process.Pid)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		out := ok(b, s.Client, "e2b_write_file", args)
		viaMCP += time.Since(t0)
		if out["success"] != true || int(num(out, "bytes_written")) != len(content) {
			b.Fatalf("e2b_write_file: %v", out)
		}
		viaSDK += sdk.write(b)
	}
	b.StopTimer()
	serverCPU := cpuTime(b, s.cmd.Process.Pid) - cpu0

	ec, err := e2b.NewClient(e2b.Config{APIKey: key, APIURL: the.emu.URL(), SandboxURL: the.emu.URL()})
	if err != nil {
		b.Fatal(err)
	}
	envd := ec.Envd(e2b.SandboxConn{ID: id, EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken})
	for _, p := range []string{mcpPath, sdkPath} {
		if got := readSandboxFile(b, envd, p); got != content {
			b.Fatalf("%s holds %d bytes, not the %d written", p, len(got), len(content))
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaMCP.Nanoseconds())/n, "mcp-ns/write")
	b.ReportMetric(float64(viaSDK.Nanoseconds())/n, "sdk-ns/write")
	b.ReportMetric(float64(viaMCP)/float64(viaSDK), "mcp/sdk")
	// The server's own CPU time per call (all its threads): steadier than wall time on a busy machine.
	b.ReportMetric(float64(serverCPU.Nanoseconds())/n, "server-cpu-ns/write")
	if raceEnabled {
		b.Log("the binary is built with -race, which slows the server several times; `make bench` builds it without")
	}
}

// E2B's JS SDK and e2b-mcp side by side on E2B's real envd (shared/envd, behind the control plane's stand-in), in
// one run, call by call in turn so that load falls on each alike: exec `true` (e2b_exec against commands.run) and
// a 1 MiB write (e2b_write_file against files.write). e2b-mcp is the built binary over stdio, driven twice: by the
// official TypeScript MCP client (tests/js/mcp_bench.mjs, which launches its own server and sandbox; the SDK works
// on that sandbox), and by the mcp-go client of these tests (its own server and sandbox). Each client times its
// own calls; the mcp-go client's encoding and parsing of a 1 MiB call cost about as much CPU as the server's, the
// TypeScript client's a few milliseconds. The e2b client of this project calling envd straight (bash -l -c true as
// the SDKs run a command, and an upload of the same bytes), on the SDK's sandbox, is the direct way. Medians are
// reported, the ratios of the medians to the SDK's and to the direct way's, and each server's CPU time per write
// and per exec.
func BenchmarkSideBySideRealEnvd(b *testing.B) {
	node := requireNode(b)
	_, err := os.Stat(filepath.Join("js", "node_modules", "e2b", "package.json"))
	requireEnv(b, err == nil, "E2B's JS SDK is not installed (run npm ci in tests/js)")
	_, err = e2btest.RealEnvdAvailable()
	requireEnv(b, err == nil, fmt.Sprintf("not run against the real envd: %v", err))
	emu, err := e2btest.New(e2btest.Options{Envd: e2btest.RealEnvds()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emu.Close)
	x := newH(b)
	owner := x.owner("bench")
	key := x.login(owner)
	s := x.startStdio(clientOpts{}, x.serveArgsAt(emu, owner, "bench", "--policy", x.allowAll())...)
	id := create(b, s.Client, map[string]any{"title": "bench"})

	content := textOfSize(1 << 20)
	contentFile := x.path("content.txt")
	if err := os.WriteFile(contentFile, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
	dir := "/tmp/e2b-mcp-side-by-side-" + strconv.Itoa(os.Getpid())
	ts := startMCPScript(b, x, node, dir+"/ts.txt", contentFile,
		x.serveArgsAt(emu, owner, "bench-ts", "--policy", x.allowAll(), "--state-dir", x.path("state-ts"))...)
	sdk := startSDKClient(b, x, emu, node, key, ts.sandbox, dir+"/sdk.txt", contentFile)
	ec, err := e2b.NewClient(e2b.Config{APIKey: key, APIURL: emu.URL(), SandboxURL: emu.URL()})
	if err != nil {
		b.Fatal(err)
	}
	sb, _ := emu.Sandbox(ts.sandbox)
	envd := ec.Envd(e2b.SandboxConn{ID: ts.sandbox, EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken})
	directExec := func() {
		end, err := envd.Start(b.Context(), e2b.StartOptions{Process: e2b.ProcessConfig{Cmd: "/bin/bash",
			Args: []string{"-l", "-c", "true"}}}, func(e2b.ProcessEvent) {})
		if err != nil || end.ExitCode != 0 {
			b.Fatalf("bash -l -c true straight to envd: %+v, %v", end, err)
		}
	}
	directWrite := func() {
		if _, err := envd.Upload(b.Context(), dir+"/direct.txt", strings.NewReader(content)); err != nil {
			b.Fatal(err)
		}
	}
	execArgs := map[string]any{"sandbox_id": id, "command": "true"}
	writeArgs := map[string]any{"sandbox_id": id, "path": dir + "/mcp.txt", "content": content}
	timed := func(f func()) time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
	}
	goExec := func() {
		if out := ok(b, s.Client, "e2b_exec", execArgs); num(out, "exit_code") != 0 {
			b.Fatalf("e2b_exec true: %v", out)
		}
	}
	goWrite := func() {
		if out := ok(b, s.Client, "e2b_write_file", writeArgs); out["success"] != true {
			b.Fatalf("e2b_write_file: %v", out)
		}
	}
	// Warm every path (connections, the directory, the JIT) before measuring.
	for range 3 {
		goExec()
		goWrite()
		ts.exec(b)
		ts.write(b)
		sdk.exec(b)
		sdk.write(b)
		directExec()
		directWrite()
	}

	var times [8][]time.Duration // in the order of names
	names := [8]string{"go-exec", "ts-exec", "sdk-exec", "go-write", "ts-write", "sdk-write", "direct-exec",
		"direct-write"}
	var cpu [4]time.Duration // go-exec, ts-exec, go-write, ts-write: the server's
	servers := [2]int{s.cmd.Process.Pid, ts.pid}
	serverTimed := func(i int, f func() time.Duration) time.Duration {
		c0 := cpuTime(b, servers[i%2])
		d := f()
		cpu[i] += cpuTime(b, servers[i%2]) - c0
		return d
	}
	b.ResetTimer()
	for range b.N {
		times[0] = append(times[0], serverTimed(0, func() time.Duration { return timed(goExec) }))
		times[1] = append(times[1], serverTimed(1, func() time.Duration { return ts.exec(b) }))
		times[2] = append(times[2], sdk.exec(b))
		times[3] = append(times[3], serverTimed(2, func() time.Duration { return timed(goWrite) }))
		times[4] = append(times[4], serverTimed(3, func() time.Duration { return ts.write(b) }))
		times[5] = append(times[5], sdk.write(b))
		times[6] = append(times[6], timed(directExec))
		times[7] = append(times[7], timed(directWrite))
	}
	b.StopTimer()
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var medians [8]time.Duration
	for i, name := range names {
		medians[i] = median(times[i])
		b.ReportMetric(ms(medians[i]), name+"-ms")
	}
	for i, name := range names[:6] {
		if i%3 != 2 {
			b.ReportMetric(float64(medians[i])/float64(medians[i/3*3+2]), name+"/sdk")
			b.ReportMetric(float64(medians[i])/float64(medians[6+i/3]), name+"/direct")
		}
	}
	for i, name := range []string{"go-exec", "ts-exec", "go-write", "ts-write"} {
		b.ReportMetric(ms(cpu[i])/n, name+"-server-cpu-ms")
	}
	if raceEnabled {
		b.Log("the binary is built with -race, which slows the server several times; `make bench` builds it without")
	}
}

// median is the middle of ds (the upper one of an even count); it sorts ds.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// textOfSize is n bytes of text as a file written by a model looks: lines of words, with quotes and tabs that
// JSON escapes.
func textOfSize(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "\tline %06d: \"the quick brown fox\" jumps over the lazy dog; a < b && c > d\n", i)
	}
	return sb.String()[:n]
}

// benchScript is a script of tests/js kept running: each call asks it for one call and returns the time it
// measured. sdk_bench.mjs makes E2B's JS SDK calls, mcp_bench.mjs e2b-mcp's tool calls through the TypeScript
// MCP client.
type benchScript struct {
	in  io.Writer
	out *bufio.Scanner
}

// startSDKClient starts sdk_bench.mjs on sandbox id of emu (writes go to path, with the content of contentFile).
func startSDKClient(b *testing.B, x *h, emu *e2btest.Server, node, key, id, path, contentFile string) *benchScript {
	return startScript(b, x, node, "sdk_bench.mjs",
		[]string{"E2B_API_KEY=" + key, "E2B_API_URL=" + emu.URL(), "E2B_SANDBOX_URL=" + emu.URL()}, id, path, contentFile)
}

// mcpScript is mcp_bench.mjs: the server it launched, and the sandbox it created there.
type mcpScript struct {
	*benchScript
	sandbox string
	pid     int
}

// startMCPScript starts mcp_bench.mjs, which launches the built binary with serveArgs and creates a sandbox (writes
// go to path, with the content of contentFile).
func startMCPScript(b *testing.B, x *h, node, path, contentFile string, serveArgs ...string) *mcpScript {
	s := &mcpScript{benchScript: startScript(b, x, node, "mcp_bench.mjs", nil,
		append([]string{path, contentFile, the.bin}, serveArgs...)...)}
	var first struct {
		Sandbox string `json:"sandbox"`
		PID     int    `json:"pid"`
	}
	if !s.out.Scan() || json.Unmarshal(s.out.Bytes(), &first) != nil || first.Sandbox == "" || first.PID <= 0 {
		b.Fatalf("mcp_bench.mjs started with %q (%v; its stderr is in the test log)", s.out.Text(), s.out.Err())
	}
	s.sandbox, s.pid = first.Sandbox, first.PID
	return s
}

// startScript starts tests/js/script with args, in the test's environment with env added.
func startScript(b *testing.B, x *h, node, script string, env []string, args ...string) *benchScript {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("js", script)}, args...)...)
	cmd.Env = append(x.env(), env...)
	cmd.Stderr = x.capture("node " + script + " stderr")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			waitfor.Recv(b, done, 30*time.Second, "node "+script+" to exit after its kill")
		}
		cancel()
	})
	return &benchScript{in: in, out: bufio.NewScanner(out)}
}

// sdkAnswer is an answer of a benchScript.
type sdkAnswer struct {
	NS       int64  `json:"ns"`
	Path     string `json:"path"`
	ExitCode *int   `json:"exitCode"`
}

func (w *benchScript) call(b *testing.B, request string) sdkAnswer {
	if _, err := io.WriteString(w.in, request+"\n"); err != nil {
		b.Fatal(err)
	}
	if !w.out.Scan() {
		b.Fatalf("the script ended without an answer: %v (its stderr is in the test log)", w.out.Err())
	}
	var answer sdkAnswer
	if err := json.Unmarshal(w.out.Bytes(), &answer); err != nil || answer.NS <= 0 {
		b.Fatalf("the script answered %q (%v)", w.out.Text(), err)
	}
	return answer
}

// write is one write of the content (files.write, or e2b_write_file).
func (w *benchScript) write(b *testing.B) time.Duration {
	a := w.call(b, "write")
	if a.Path == "" {
		b.Fatalf("the script wrote to no path: %+v", a)
	}
	return time.Duration(a.NS)
}

// exec is one run of `true` (commands.run, or e2b_exec).
func (w *benchScript) exec(b *testing.B) time.Duration {
	a := w.call(b, "exec")
	if a.ExitCode == nil || *a.ExitCode != 0 {
		b.Fatalf("the script ran true with exit code %v", a.ExitCode)
	}
	return time.Duration(a.NS)
}

func readSandboxFile(b *testing.B, envd *e2b.Envd, path string) string {
	r, _, err := envd.Download(b.Context(), path, e2b.DownloadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		b.Fatal(err)
	}
	return buf.String()
}

// Resident memory of an idle server after start-up and one tools/list, read from /proc.
func BenchmarkIdleServerRSS(b *testing.B) {
	x := newH(b)
	requireKeyring(b)
	owner := x.owner("bench")
	args := x.serveArgs(owner, "bench")
	var total float64
	for range b.N {
		s := x.startStdio(clientOpts{}, args...)
		if _, err := s.ListTools(b.Context(), mcp.ListToolsRequest{}); err != nil {
			b.Fatal(err)
		}
		rss, err := rssKiB(s.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		total += float64(rss)
		s.Close()
	}
	b.ReportMetric(total/float64(b.N), "rss-KiB")
	if raceEnabled {
		b.Log("the binary is built with -race, which inflates its memory several times")
	}
}

// cpuTime is the CPU time (user and system, all threads) a process has used so far, from /proc/PID/stat, in
// clock ticks of 10 ms (Linux's USER_HZ is 100).
func cpuTime(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (in parentheses, which may hold spaces): utime and stime are the 12th
	// and 13th of them.
	_, after, found := strings.Cut(string(raw), ") ")
	fields := strings.Fields(after)
	if !found || len(fields) < 13 {
		b.Fatalf("/proc/%d/stat: unexpected format %q", pid, raw)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// rssKiB reads VmRSS of a process from /proc/PID/status.
func rssKiB(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), "VmRSS:"); found {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
