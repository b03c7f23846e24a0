package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Record returns only once its entry is durable: for every entry, the first of the log, the first after a
// rotation and those between, the active file is synced after the whole line is in it and before Record returns.
func TestRecordSyncsEachEntryBeforeReturning(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxBytes: 600, MaxFiles: 3})
	var synced []int64 // the size of the file at each sync
	l.syncFile = func(f *os.File) error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		synced = append(synced, st.Size()) // Record holds the log's lock around the sync
		return f.Sync()
	}
	for i := range 8 {
		before := len(synced)
		if err := l.Record(numbered("durable", i)); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(dir, activeName))
		if err != nil {
			t.Fatal(err)
		}
		if len(synced) != before+1 || synced[len(synced)-1] != st.Size() {
			t.Fatalf("entry %d: synced at sizes %v, want one sync of the file with the whole entry (%d bytes)", i, synced[before:], st.Size())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, rotatedName(1))); err != nil {
		t.Fatalf("the log never rotated, so entries after a rotation went unchecked: %v", err)
	}
}

// Records of concurrent calls share a write and a sync (a group commit): twenty calls that start while another
// call's record is being synced are written and synced together once it is done, and each Start returns with its
// record on disk.
func TestConcurrentRecordsShareASync(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	const waiting = 20
	calls := make([]*Call, waiting+1)
	for i := range calls {
		c, err := l.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		calls[i] = c
	}
	var syncs atomic.Int64
	first, release := make(chan struct{}), make(chan struct{})
	l.syncFile = func(f *os.File) error {
		if syncs.Add(1) == 1 {
			close(first)
			select {
			case <-release:
			case <-time.After(time.Minute):
				return errors.New("the test never released the first sync")
			}
		}
		return f.Sync()
	}
	errs := make(chan error, len(calls))
	go func() { errs <- calls[0].Start(numbered("group", 0)) }()
	waitfor.Recv(t, first, time.Minute, "the first record reaching its sync")
	for i := 1; i <= waiting; i++ {
		go func() { errs <- calls[i].Start(numbered(fmt.Sprintf("group%d", i), 0)) }()
	}
	waitfor.Until(t, time.Minute, "the twenty records queue behind the first's sync", func() bool {
		l.queueMu.Lock()
		defer l.queueMu.Unlock()
		return len(l.queue) == waiting
	})
	close(release)
	for range calls {
		if err := waitfor.Recv(t, errs, time.Minute, "a Start returning"); err != nil {
			t.Fatal(err)
		}
	}
	if n := syncs.Load(); n != 2 {
		t.Errorf("%d records took %d syncs; want 2 (the first's, and one for the twenty queued behind it)", len(calls), n)
	}
	got, err := Read(dir, Filter{})
	if err != nil || len(got) != len(calls) {
		t.Fatalf("read %d records (%v), want %d", len(got), err, len(calls))
	}
}
