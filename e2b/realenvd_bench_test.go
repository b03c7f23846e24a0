package e2b

import (
	"context"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

// BenchmarkExecTrueRealEnvd runs `true` on E2B's real envd (shared/envd) three ways in turn, so that load
// affects each alike: as E2B's SDKs run a command (bash -l -c, one process), and through RunCommand without and
// with the command's log in the sandbox (e2b_exec's way). ns/op is a round of all three; each one's mean is a
// metric of its own, and ours/sdk compares the logged command with the SDK's.
func BenchmarkExecTrueRealEnvd(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := e2btest.StartRealEnvd(ctx, nil)
	if err != nil {
		b.Skip(err)
	}
	defer r.Stop()
	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: r.URL, SandboxURL: r.URL})
	if err != nil {
		b.Fatal(err)
	}
	e := c.Envd(SandboxConn{ID: "realenvd", EnvdVersion: r.Version, AccessToken: r.AccessToken})
	bctx := context.Background()
	sdk := func() error {
		end, err := e.Start(bctx, StartOptions{Process: ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "true"}}},
			func(ProcessEvent) {})
		if err == nil && end.ExitCode != 0 {
			b.Fatalf("sdk: %+v", end)
		}
		return err
	}
	run := func(logDir string) func() error {
		return func() error {
			res, err := e.RunCommand(bctx, "true", CommandOptions{LogDir: logDir})
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("RunCommand: %+v", res)
			}
			return err
		}
	}
	ways := []struct {
		metric string
		do     func() error
		total  time.Duration
	}{
		{"sdk-ns/exec", sdk, 0},
		{"nolog-ns/exec", run(""), 0},
		{"log-ns/exec", run("/tmp/e2b-mcp-bench-" + unique(nil)), 0},
	}
	for i := range ways { // warm the connection and the log directory
		if err := ways[i].do(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for i := range ways {
			t0 := time.Now()
			if err := ways[i].do(); err != nil {
				b.Fatal(err)
			}
			ways[i].total += time.Since(t0)
		}
	}
	n := float64(b.N)
	for _, w := range ways {
		b.ReportMetric(float64(w.total.Nanoseconds())/n, w.metric)
	}
	b.ReportMetric(float64(ways[2].total)/float64(ways[0].total), "ours/sdk")
}
