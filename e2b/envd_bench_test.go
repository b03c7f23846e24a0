package e2b

import (
	"bufio"
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

// Benchmarks of the envd client against the emulator (client and emulator share this process, so memory
// figures cover both ends of a transfer).

func benchEnvd(b *testing.B) (*Envd, *e2btest.Server) {
	b.Helper()
	srv, err := e2btest.New(e2btest.Options{ExpiryInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: srv.URL(), SandboxURL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := c.CreateSandbox(context.Background(), NewSandbox{TemplateID: "base", Timeout: 3600, Secure: true})
	if err != nil {
		b.Fatal(err)
	}
	return c.Envd(c.Conn(sb)), srv
}

// BenchmarkExecTrue is the round trip of a trivial command: stream set-up, a bwrap sandbox, bash -l, the end.
func BenchmarkExecTrue(b *testing.B) {
	e, _ := benchEnvd(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		res, err := e.RunCommand(ctx, "true", CommandOptions{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkExecTrueWithLog is BenchmarkExecTrue with the command's output written to its log in the sandbox as
// well (CommandOptions.LogDir, as every command of e2b_exec has): the cost of the tees and the log files.
func BenchmarkExecTrueWithLog(b *testing.B) {
	e, _ := benchEnvd(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		res, err := e.RunCommand(ctx, "true", CommandOptions{LogDir: "/tmp/e2b-mcp-bench"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ left int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(b))
	if n > p.left {
		n = p.left
	}
	for i := range b[:n] {
		b[i] = byte('a' + (p.left-int64(i))%26)
	}
	p.left -= n
	return int(n), nil
}

// memWatch samples the heap while a transfer runs and resets the peak RSS first, so that both can be reported.
type memWatch struct {
	stop     chan struct{}
	done     sync.WaitGroup
	peakHeap uint64
	start    runtime.MemStats
}

func watchMemory() *memWatch {
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM (Linux); best effort
	m := &memWatch{stop: make(chan struct{})}
	runtime.ReadMemStats(&m.start)
	m.done.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			m.peakHeap = max(m.peakHeap, ms.HeapInuse)
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	})
	return m
}

func (m *memWatch) report(b *testing.B, bytesMoved int64, elapsed time.Duration) {
	close(m.stop)
	m.done.Wait()
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	b.ReportMetric(float64(bytesMoved)/elapsed.Seconds(), "bytes/s")
	b.ReportMetric(float64(m.peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(end.TotalAlloc-m.start.TotalAlloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
	}
}

// peakRSS is VmHWM of this process in bytes (0 when unknown).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func benchUpload(b *testing.B, size int64) {
	e, srv := benchEnvd(b)
	ctx := context.Background()
	b.SetBytes(size)
	mw := watchMemory()
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Upload(ctx, "/tmp/bench.bin", &patternReader{left: size}); err != nil {
			b.Fatal(err)
		}
		srv.ResetRequests() // the emulator keeps the start of every upload it records
	}
	b.StopTimer()
	mw.report(b, size*int64(b.N), time.Since(start))
}

func benchDownload(b *testing.B, size int64) {
	e, srv := benchEnvd(b)
	ctx := context.Background()
	if _, err := e.Upload(ctx, "/tmp/bench.bin", &patternReader{left: size}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	mw := watchMemory()
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		r, n, err := e.Download(ctx, "/tmp/bench.bin", DownloadOptions{})
		if err != nil || n != size {
			b.Fatalf("size %d: %v", n, err)
		}
		got, err := io.Copy(io.Discard, r)
		r.Close()
		if err != nil || got != size {
			b.Fatalf("read %d: %v", got, err)
		}
		srv.ResetRequests()
	}
	b.StopTimer()
	mw.report(b, size*int64(b.N), time.Since(start))
}

func BenchmarkUpload1MiB(b *testing.B)     { benchUpload(b, 1<<20) }
func BenchmarkDownload1MiB(b *testing.B)   { benchDownload(b, 1<<20) }
func BenchmarkUpload256MiB(b *testing.B)   { benchUpload(b, 256<<20) }
func BenchmarkDownload256MiB(b *testing.B) { benchDownload(b, 256<<20) }

// BenchmarkStreamOutput measures a command's output streamed to the caller: 64 MiB of stdout.
func BenchmarkStreamOutput64MiB(b *testing.B) {
	e, _ := benchEnvd(b)
	ctx := context.Background()
	const size = 64 << 20
	b.SetBytes(size)
	mw := watchMemory()
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		var got int64
		_, err := e.RunCommand(ctx, "head -c "+strconv.Itoa(size)+" /dev/zero", CommandOptions{OnOutput: func(_ EventKind, d []byte) { got += int64(len(d)) }})
		if err != nil || got != size {
			b.Fatalf("%d bytes: %v", got, err)
		}
	}
	b.StopTimer()
	mw.report(b, size*int64(b.N), time.Since(start))
}
