package audit

import (
	"os"
	"path/filepath"
	"testing"
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
