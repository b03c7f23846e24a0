package workspace

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The sandbox side runs here as it runs in a sandbox: the same commands, through bash, on a directory of this
// machine.

func run(t *testing.T, script string) []byte {
	t.Helper()
	out, err := exec.Command("bash", "-c", script).Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return out
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// syncIn walks local and unpacks what it sends into remote, returning the manifest as the sandbox keeps it.
func syncIn(t *testing.T, local, remote string, last *Manifest, opts Options) (*Manifest, *Plan, *Tree) {
	t.Helper()
	root := openRoot(t, local)
	tree, err := Walk(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanSync(root, tree, last)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	var buf bytes.Buffer
	if err := WriteTar(&buf, root, plan.Send); err != nil {
		t.Fatal(err)
	}
	tarPath, delPath, manTmp := filepath.Join(scratch, "t.tar"), "", filepath.Join(scratch, "m.json")
	os.WriteFile(tarPath, buf.Bytes(), 0o600)
	if len(plan.Delete) > 0 {
		delPath = filepath.Join(scratch, "del")
		os.WriteFile(delPath, []byte(strings.Join(plan.Delete, "\x00")), 0o600)
	}
	os.WriteFile(manTmp, []byte("{}"), 0o600)
	run(t, UnpackCommand(remote, tarPath, delPath, manTmp, filepath.Join(scratch, "kept", "m.json")))
	return &Manifest{Version: ManifestVersion, Stated: plan.Stated, Entries: plan.Entries}, plan, tree
}

// syncOut lists remote, fetches what changed and reads the base from local: the changes and the conflicts.
func syncOut(t *testing.T, local, remote string, m *Manifest, opts Options) ([]Change, []Conflict, map[string]bool) {
	t.Helper()
	root := openRoot(t, local)
	tree, err := Walk(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	listing, err := ParseListing(run(t, ListCommand(remote, tree.PrunedNames(), nil)), tree, 1000)
	if err != nil {
		t.Fatal(err)
	}
	changes, fetch := Compare(m.Index(), listing, tree)
	scratch := t.TempDir()
	list, tarPath := filepath.Join(scratch, "list"), filepath.Join(scratch, "out.tar")
	os.WriteFile(list, []byte(strings.Join(fetch, "\x00")), 0o600)
	run(t, TarCommand(remote, list, tarPath))
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	changes, err = ReadFetched(f, changes, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, e := range listing {
		if e.Type == TypeDir {
			dirs[e.Path] = true
		}
	}
	return changes, ReadBase(root, changes), dirs
}

func TestRoundTrip(t *testing.T) {
	local, remote := t.TempDir(), t.TempDir()
	write(t, local, map[string]string{
		".gitignore":      "build/\n*.log\n",
		"main.go":         "package main\n\nfunc main() {\n\tprintln(1)\n}\n",
		"lib/a.txt":       strings.Repeat("line\n", 50),
		"lib/gone.txt":    "bye\n",
		"build/out":       "artefact",
		"x.log":           "log",
		".env":            "SECRET=1",
		"noeol.txt":       "no newline",
		"bin/blob":        "\x00\x01\x02binary",
		".git/HEAD":       "ref: refs/heads/main\n",
		"sub/.gitignore":  "local.txt\n",
		"sub/local.txt":   "ignored below sub",
		"sub/kept.txt":    "kept",
		".env.example":    "SECRET=",
		"scripts/run.sh":  "#!/bin/sh\necho hi\n",
		"keys/server.pem": "-----BEGIN PRIVATE KEY-----",
	})
	os.Chmod(filepath.Join(local, "scripts/run.sh"), 0o755)
	os.Symlink("lib/a.txt", filepath.Join(local, "link-in"))
	os.Symlink("../../etc/passwd", filepath.Join(local, "link-out"))

	m, plan, tree := syncIn(t, local, remote, nil, Options{})
	for _, p := range []string{"build", "x.log", ".env", ".git", "sub/local.txt", "link-out", "keys/server.pem"} {
		if _, err := os.Lstat(filepath.Join(remote, p)); err == nil {
			t.Errorf("%s was synced in", p)
		}
	}
	for _, p := range []string{"main.go", "lib/a.txt", ".env.example", "sub/kept.txt", "bin/blob"} {
		if _, err := os.Stat(filepath.Join(remote, p)); err != nil {
			t.Errorf("%s was not synced in: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(remote, "scripts/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh lost its mode: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(remote, "link-in")); err != nil || l != "lib/a.txt" {
		t.Errorf("link-in = %q, %v", l, err)
	}
	var notes []string
	for _, l := range tree.LeftOut {
		notes = append(notes, l.Path+": "+l.Why)
	}
	got := strings.Join(notes, "\n")
	for _, want := range []string{".env: " + WhySecret, "keys/server.pem: " + WhySecret, "link-out: " + WhyLinkOutside} {
		if !strings.Contains(got, want) {
			t.Errorf("left out:\n%s\nwant %q", got, want)
		}
	}
	if len(plan.Send) != len(plan.Entries) {
		t.Errorf("a first sync sent %d of %d entries", len(plan.Send), len(plan.Entries))
	}

	// One change locally: only it goes; a deletion is deleted there.
	write(t, local, map[string]string{"main.go": "package main\n\nfunc main() {\n\tprintln(2)\n}\n"})
	os.Remove(filepath.Join(local, "lib/gone.txt"))
	m, plan, _ = syncIn(t, local, remote, m, Options{})
	if len(plan.Send) != 1 || plan.Send[0].Path != "main.go" || len(plan.Delete) != 1 || plan.Delete[0] != "lib/gone.txt" {
		t.Fatalf("second sync sent %v, deleted %v", plan.Send, plan.Delete)
	}
	if _, err := os.Stat(filepath.Join(remote, "lib/gone.txt")); err == nil {
		t.Error("a file deleted locally is still in the sandbox")
	}

	// The sandbox changes things; the patch applies with git, and Apply makes the trees equal.
	write(t, remote, map[string]string{
		"main.go":       "package main\n\nfunc main() {\n\tprintln(3)\n}\n",
		"lib/new.txt":   "new\n",
		"noeol.txt":     "no newline, changed",
		"bin/blob":      "\x00\x01\x03binary, changed",
		"build/more":    "ignored output",
		"sub/local.txt": "still ignored",
	})
	os.Remove(filepath.Join(remote, "sub/kept.txt"))
	os.Chmod(filepath.Join(remote, "lib/a.txt"), 0o755)
	changes, conflicts, dirs := syncOut(t, local, remote, m, Options{})
	if len(conflicts) > 0 {
		t.Fatalf("conflicts: %v", conflicts)
	}
	var names []string
	for _, c := range changes {
		names = append(names, c.Kind()+" "+c.Path)
	}
	want := "modified bin/blob, modified lib/a.txt, added lib/new.txt, modified main.go, modified noeol.txt, deleted sub/kept.txt"
	if strings.Join(names, ", ") != want {
		t.Fatalf("changes: %s\nwant     %s", strings.Join(names, ", "), want)
	}
	var patch bytes.Buffer
	WritePatch(&patch, changes)
	check := exec.Command("git", "apply", "--check", "-v", "-")
	check.Dir, check.Stdin = local, bytes.NewReader(patch.Bytes())
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("git apply --check: %v\n%s\npatch:\n%s", err, out, patch.String())
	}
	if err := Apply(openRoot(t, local), changes, dirs); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("diff", "-r", "--no-dereference", "-x", "build", "-x", "*.log", "-x", ".env", "-x", ".git", "-x", "local.txt",
		"-x", "keys", "-x", "link-out", local, remote).CombinedOutput(); err != nil {
		t.Fatalf("the trees differ after apply: %v\n%s", err, out)
	}
	if fi, _ := os.Stat(filepath.Join(local, "lib/a.txt")); fi.Mode().Perm() != 0o755 {
		t.Errorf("the mode change was not applied: %v", fi.Mode())
	}
}

func TestApplyRefusesLocalChangesAndTouchesNothing(t *testing.T) {
	local, remote := t.TempDir(), t.TempDir()
	write(t, local, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	m, _, _ := syncIn(t, local, remote, nil, Options{})
	write(t, remote, map[string]string{"a.txt": "a from the sandbox\n", "b.txt": "b from the sandbox\n"})
	write(t, local, map[string]string{"b.txt": "B\n"}) // the same size: only the content tells
	changes, conflicts, dirs := syncOut(t, local, remote, m, Options{})
	if len(conflicts) != 1 || conflicts[0].Path != "b.txt" {
		t.Fatalf("conflicts = %v, want b.txt", conflicts)
	}
	err := Apply(openRoot(t, local), changes, dirs)
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "b.txt") {
		t.Fatalf("apply = %v, want a conflict naming b.txt", err)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "a.txt")); string(b) != "a\n" {
		t.Errorf("a.txt was changed by a refused apply: %q", b)
	}
	if ents, _ := os.ReadDir(local); len(ents) != 2 {
		t.Errorf("a refused apply left files behind: %v", ents)
	}
}

// A directory the local .gitignore leaves out after the sync in is out of the sync out too: its files, which the
// sandbox still has, are not reported deleted.
func TestSyncOutHonoursAnIgnoreAddedLater(t *testing.T) {
	local, remote := t.TempDir(), t.TempDir()
	write(t, local, map[string]string{"gen/x.txt": "x\n", "a.txt": "a\n"})
	m, _, _ := syncIn(t, local, remote, nil, Options{})
	write(t, local, map[string]string{".gitignore": "gen/\n"})
	changes, _, _ := syncOut(t, local, remote, m, Options{})
	for _, c := range changes {
		t.Errorf("change %s %s, want none", c.Kind(), c.Path)
	}
}
