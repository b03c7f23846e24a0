package state

import (
	"bufio"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Each Store operation opens state.db, runs one transaction and closes it (see the package comment); these
// benchmarks measure what that costs. BenchmarkBoltViewHeldOpen is the baseline of a handle kept open.

// BenchmarkPutSandbox, BenchmarkUpdateSandbox and BenchmarkSandboxRead run against both stores: the bbolt file
// and PostgreSQL on loopback (a server started for the package, durability settings of a test cluster).

func BenchmarkPutSandbox(b *testing.B) {
	forEachStoreB(b, func(b *testing.B, k storeKind) {
		s, clock := k.newTestStore(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := s.PutSandbox(sampleSandbox("alice", fmt.Sprintf("sbx%08d", i), "main", clock.Now())); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkUpdateSandbox(b *testing.B) {
	forEachStoreB(b, func(b *testing.B, k storeKind) {
		s, clock := k.newTestStore(b)
		if err := s.PutSandbox(sampleSandbox("alice", "sbx", "main", clock.Now())); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.UpdateSandbox("alice", "sbx", func(r *SandboxRecord) error { r.Steps++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSandboxRead(b *testing.B) {
	forEachStoreB(b, func(b *testing.B, k storeKind) {
		s, clock := k.newTestStore(b)
		for i := range 100 {
			if err := s.PutSandbox(sampleSandbox("alice", fmt.Sprintf("sbx%05d", i), "main", clock.Now())); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := s.Sandbox("alice", fmt.Sprintf("sbx%05d", i%100)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkSandboxReadParallel(b *testing.B) {
	s := storeWithSandboxes(b, 100)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := s.Sandbox("alice", fmt.Sprintf("sbx%05d", i%100)); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkSessionSandboxes1000(b *testing.B) {
	s := storeWithSandboxes(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		rs, err := s.SessionSandboxes("alice", "main")
		if err != nil || len(rs) != 1000 {
			b.Fatalf("%d records, %v", len(rs), err)
		}
	}
}

// BenchmarkPutSandboxContended writes while another process writes to the same file continuously, measuring the
// lock hand-over between processes.
func BenchmarkPutSandboxContended(b *testing.B) {
	dir := b.TempDir()
	s := openTestStore(b, dir, Options{})
	other := helperCmd(b, "write-until-stdin-closes", dir, "")
	stdin, err := other.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := other.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := other.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = other.Wait()
	}()
	// Start measuring once the other process is writing; count its writes (one line each) meanwhile.
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		b.Fatalf("the other process did not start writing: %v", lines.Err())
	}
	var theirs atomic.Int64
	go func() {
		for lines.Scan() {
			theirs.Add(1)
		}
	}()
	b.ReportAllocs()
	var slowest time.Duration
	i := 0
	start := theirs.Load()
	for b.Loop() {
		t0 := time.Now()
		if err := s.PutSandbox(sampleSandbox("alice", fmt.Sprintf("sbx%08d", i), "main", time.Now())); err != nil {
			b.Fatal(err)
		}
		slowest = max(slowest, time.Since(t0))
		i++
	}
	b.StopTimer()
	b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(theirs.Load()-start)/float64(i), "other-writes/op")
	if _, err := s.Sandbox("alice", crashRecord("bg", 99).ID); err != nil {
		b.Fatalf("the other process did not keep writing: %v", err)
	}
}

// BenchmarkBoltViewHeldOpen reads one record through a bbolt handle kept open, without decoding: the floor that
// per-operation opening adds to.
func BenchmarkBoltViewHeldOpen(b *testing.B) {
	s := storeWithSandboxes(b, 100)
	db := openAsAnotherProcess(b, filepath.Join(filepath.Dir(s.Path()), FileName), &bolt.Options{ReadOnly: true})
	defer db.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		err := db.View(func(tx *bolt.Tx) error {
			if tx.Bucket([]byte(bucketSandboxes)).Get(recordKey("alice", fmt.Sprintf("sbx%05d", i%100))) == nil {
				return ErrNotFound
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkOpen1000 measures Open of a file holding 1,000 sandboxes, which includes reading every record and
// bbolt's consistency check.
func BenchmarkOpen1000(b *testing.B) {
	s := storeWithSandboxes(b, 1000)
	dir := filepath.Dir(s.Path())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(dir, Options{Keys: StaticKeySource(testKey(1))}); err != nil {
			b.Fatal(err)
		}
	}
}

// storeWithSandboxes fills one session with n records in a single transaction.
func storeWithSandboxes(b *testing.B, n int) *Bolt {
	b.Helper()
	s, clock := newBoltStore(b)
	err := s.db.update(func(tx recordTx) error {
		for i := range n {
			if err := s.putSandbox(tx, new(sampleSandbox("alice", fmt.Sprintf("sbx%05d", i), "main", clock.Now()))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
