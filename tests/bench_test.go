package tests

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
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
