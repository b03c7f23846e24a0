package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/modcachetest"
)

// BenchmarkSync measures, on the emulator and on the real envd, a repository of about 2,000 files and 53 MB: the
// first e2b_sync_in, a re-sync after one local change, and an e2b_sync_out of a 10-file change, beside a baseline
// taken in the same run, the same tree as one tar uploaded through /files and unpacked with one command. Each
// iteration does all four; the metrics are their means.
func BenchmarkSync(b *testing.B) {
	for _, backend := range []string{"emulator", "envd"} {
		b.Run(backend, func(b *testing.B) {
			opts := e2btest.Options{}
			if backend == "envd" {
				if _, err := e2btest.RealEnvdAvailable(); err != nil {
					b.Skip("no real envd: ", err)
				}
				opts.Envd = e2btest.RealEnvds()
			}
			root := b.TempDir()
			repo := filepath.Join(root, "repo")
			os.Mkdir(repo, 0o755)
			modcachetest.Copy(b, repo, modcachetest.Repository)
			e := newEnvWith(b, opts, syncConfig(root, b.TempDir()))
			s := e.connect(b, eras[0], Caller{Owner: "alice", Session: "main"})
			id := s.ok(b, "e2b_create_sandbox", map[string]any{})["sandbox_id"].(string)
			ev := e.envdOf(b, "alice", id)
			var baseline, first, resync, out time.Duration
			var files, bytes int
			b.ResetTimer()
			for i := range b.N {
				remote := fmt.Sprintf("/home/user/bench-%d", i)
				baseline += tarBaseline(b, ev, repo, remote+"-baseline")

				start := time.Now()
				in := s.ok(b, syncInName, map[string]any{"sandbox_id": id, "local_path": repo, "remote_path": remote})
				first += time.Since(start)
				files, bytes = num(in["entries"]), num(in["bytes_sent"])

				os.WriteFile(filepath.Join(repo, "text", "doc.go"), fmt.Appendf(nil, "// Package text, change %d.\npackage text\n", i), 0o644)
				start = time.Now()
				if again := s.ok(b, syncInName, map[string]any{"sandbox_id": id, "local_path": repo, "remote_path": remote}); num(again["sent"]) != 1 {
					b.Fatalf("a re-sync of one changed file sent %v", again["sent"])
				}
				resync += time.Since(start)

				s.ok(b, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cd " + remote + "/text && for f in $(ls language/*.go | head -10); do echo '// changed' >> $f; done"})
				start = time.Now()
				if o := s.ok(b, syncOutName, map[string]any{"sandbox_id": id, "remote_path": remote, "local_path": repo}); num(o["changed"]) != 10 {
					b.Fatalf("sync out of a 10-file change found %v", o["changed"])
				}
				out += time.Since(start)
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(baseline.Seconds()/n, "baseline-s")
			b.ReportMetric(first.Seconds()/n, "first-sync-s")
			b.ReportMetric(first.Seconds()/baseline.Seconds(), "first/baseline")
			b.ReportMetric(float64(files)*n/first.Seconds(), "first-files/s")
			b.ReportMetric(float64(bytes)/(1<<20)*n/first.Seconds(), "first-MB/s")
			b.ReportMetric(resync.Seconds()/n, "resync-1-file-s")
			b.ReportMetric(out.Seconds()/n, "sync-out-10-files-s")
		})
	}
}

// tarBaseline uploads repo as one tar (made by tar(1), streamed) through /files and unpacks it with one command.
func tarBaseline(b *testing.B, ev *e2b.Envd, repo, remote string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	cmd := exec.Command("tar", "-cf", "-", "-C", repo, ".")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := ev.Upload(ctx, remote+".tar", pipe); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	res, err := ev.RunCommand(ctx, "mkdir -p "+remote+" && tar -xf "+remote+".tar -C "+remote+" && rm "+remote+".tar", e2b.CommandOptions{})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("unpacking the baseline: %v %v", res, err)
	}
	return time.Since(start)
}
