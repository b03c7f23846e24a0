package workspace

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// sent reports whether a plan sends the entry at name.
func sent(p *Plan, name string) bool {
	for _, e := range p.Send {
		if e.Path == name {
			return true
		}
	}
	return false
}

// walkedLater moves a manifest's walk a minute on, as if the sync had walked long after its files were last
// written: the quick check may then trust the hashes it recorded.
func walkedLater(m *Manifest) *Manifest {
	m.Stated += int64(time.Minute)
	return m
}

// An edit that keeps a file's size and puts its modification time back (touch -r, a tool that keeps times) is
// still sent: the change time, which only the kernel sets, tells it apart, as in git's index.
func TestQuickCheckSeesAnEditThatKeepsSizeAndMTime(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("this system gives no change time through os.Stat")
	}
	local, remote := t.TempDir(), t.TempDir()
	write(t, local, map[string]string{"a.txt": "before\n", "b.txt": "untouched\n"})
	p := filepath.Join(local, "a.txt")
	was, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := syncIn(t, local, remote, nil, Options{})
	// The edit must fall in a later tick of the file system's clock than the file's creation, or no stat could
	// tell the two apart (that is the racy case, TestQuickCheckHashesARacyFile).
	probe := filepath.Join(t.TempDir(), "probe")
	waitfor.Until(t, 10*time.Second, "the file system's clock to move past a.txt's change time", func() bool {
		os.WriteFile(probe, nil, 0o600)
		fi, err := os.Stat(probe)
		return err == nil && statOf(fi).CTime > statOf(was).CTime
	})
	write(t, local, map[string]string{"a.txt": "after!\n"})
	if err := os.Chtimes(p, was.ModTime(), was.ModTime()); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.Stat(p); now.Size() != was.Size() || !now.ModTime().Equal(was.ModTime()) {
		t.Fatalf("the edit changed the size or the modification time: %v %v, was %v %v", now.Size(), now.ModTime(),
			was.Size(), was.ModTime())
	}
	_, plan, _ := syncIn(t, local, remote, walkedLater(m), Options{})
	if !sent(plan, "a.txt") || sent(plan, "b.txt") {
		t.Fatalf("sent %v, want a.txt (edited, same size, modification time put back) and not b.txt", plan.Send)
	}
	if got, _ := os.ReadFile(filepath.Join(remote, "a.txt")); string(got) != "after!\n" {
		t.Fatalf("the sandbox's a.txt is %q, want the edit", got)
	}
}

// A file whose times are as new as the walk that hashed it may have been changed in the same tick of the file
// system's clock, after its hash, keeping its size and times (git's "racily clean" entries): the next sync hashes
// it again instead of trusting the manifest. A manifest's hash stands here for content read before such a change,
// since no stat can show one.
func TestQuickCheckHashesARacyFile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shift    func(*Manifest)
		wantSent bool
	}{
		{"changed in the tick of the sync", func(*Manifest) {}, true},
		{"a manifest that does not say when it walked", func(m *Manifest) { m.Stated = 0 }, true},
		// The control: with the file's times safely older than the walk, the hash is trusted and the file not read
		// (the planted hash would otherwise differ from its content, and send it).
		{"older than the sync", func(m *Manifest) { walkedLater(m) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local, remote := t.TempDir(), t.TempDir()
			write(t, local, map[string]string{"a.txt": "content\n"})
			m, _, _ := syncIn(t, local, remote, nil, Options{})
			for i := range m.Entries {
				if m.Entries[i].Path == "a.txt" {
					m.Entries[i].Hash = "0000000000000000000000000000000000000000000000000000000000000000"
				}
			}
			tc.shift(m)
			_, plan, _ := syncIn(t, local, remote, m, Options{})
			if got := sent(plan, "a.txt"); got != tc.wantSent {
				t.Fatalf("a.txt sent: %v, want %v", got, tc.wantSent)
			}
		})
	}
}
