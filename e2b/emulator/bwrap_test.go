package emulator

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// A sandbox's /etc hides what only root may read, and its start does not depend on /etc standing still: entries
// another program removes between the listing of /etc and bwrap's mounts (useradd's lock and backup files, here a
// private and a readable file) leave the sandbox to start as usual, the readable one absent there (the private one
// may stay as an empty file). Private files read empty, private directories are empty, readable files are as on
// the host, and /etc is read-only.
func TestEtcMaskedWhileEtcChanges(t *testing.T) {
	if os.Geteuid() != 0 {
		optional.Missing(t, "the emulator masks /etc only as root, and this test writes to /etc")
	}
	name := filepath.Join("/etc", fmt.Sprintf("e2b-mcp-test-%d", time.Now().UnixNano()))
	files := map[string]struct {
		content string
		perm    os.FileMode
	}{
		name + ".lock":    {"secret", 0o600},
		name + ".conf":    {"visible", 0o644},
		name + "-":        {"secret backup", 0o600},
		name + ".pending": {"gone soon", 0o644},
	}
	t.Cleanup(func() {
		for p := range files {
			os.Remove(p)
		}
		os.RemoveAll(name + ".d")
	})
	for p, f := range files {
		if err := os.WriteFile(p, []byte(f.content), f.perm); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(name+".d", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name+".d/key", []byte("secret key"), 0o600); err != nil {
		t.Fatal(err)
	}

	iso := probeIsolation()
	if iso.err != nil {
		optional.Missing(t, iso.err.Error())
	}
	args := append([]string{"--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000", "--die-with-parent"}, iso.systemArgs...)
	args = append(args, etcArgs()...) // /etc as listed now
	// Another program removes two of the entries before bwrap mounts them.
	for _, p := range []string{name + "-", name + ".pending"} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`printf '[%%s]' "$(cat %[1]s.lock)" "$(ls -A %[1]s.d)" "$(cat %[1]s.conf)"
		[ -e %[1]s.pending ] && printf ' removed file there'
		[ -s %[1]s- ] && printf ' removed backup readable'
		touch %[1]s.new 2>/dev/null && printf ' writable'
		exit 0`, name)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", script)
	cmd := exec.Command(iso.bwrap, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	os.Remove(name + ".new")
	if err != nil {
		t.Fatalf("the sandbox did not start after /etc changed under it: %v: %s", err, stderr.String())
	}
	if got, want := string(out), "[][][visible]"; got != want {
		t.Fatalf("in the sandbox: %q, want %q (private files empty, private directories empty, the rest as it is, /etc read-only)", got, want)
	}
}
