package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the module's root, seen from this package's directory.
const root = "../.."

// Every file that follows from the tool definitions is as make generate writes it: a description, schema, hint or
// the built-in policy changed without regenerating fails here, naming the file.
func TestGeneratedFilesAreFresh(t *testing.T) {
	stale, err := run(root, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range stale {
		t.Errorf("%s is stale: run make generate", path)
	}
}

// A changed definition makes its files stale, and generating brings every one of them back, in a copy of the
// files: a tool's description reaches its snapshot, the README's table and the bundle's manifest; a leftover
// snapshot is removed; a document without its markers is an error, not a silent skip.
func TestGenerateRewritesWhatIsStale(t *testing.T) {
	dir := t.TempDir()
	files, err := generated(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		// The old text of every file: a description the definitions no longer give.
		data = []byte(strings.ReplaceAll(string(data), "Run a shell command in a sandbox", "Run a command somewhere"))
		write(t, filepath.Join(dir, f.path), data)
	}
	write(t, filepath.Join(dir, snapshotDir, "e2b_renamed_away.json"), []byte("{}\n"))

	stale, err := run(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{snapshotPath("e2b_exec"), readmePath, manifestPath,
		filepath.Join(snapshotDir, "e2b_renamed_away.json")} {
		if !slices.Contains(stale, want) {
			t.Errorf("%s is not found stale; stale: %v", want, stale)
		}
	}
	if _, err := run(dir, true); err != nil {
		t.Fatal(err)
	}
	if stale, err := run(dir, false); err != nil || len(stale) > 0 {
		t.Errorf("after generating, stale: %v, %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotDir, "e2b_renamed_away.json")); !os.IsNotExist(err) {
		t.Errorf("the leftover snapshot is still there: %v", err)
	}

	// A stale snapshot and a README without its markers: an error, and nothing written.
	write(t, filepath.Join(dir, readmePath), []byte("# e2b-mcp\n\nno markers\n"))
	write(t, filepath.Join(dir, snapshotPath("e2b_exec")), []byte("{}\n"))
	if _, err := run(dir, true); err == nil || !strings.Contains(err.Error(), "markers") {
		t.Errorf("a README without its markers: %v, want an error naming them", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, snapshotPath("e2b_exec"))); string(data) != "{}\n" {
		t.Errorf("a failed run wrote %s", snapshotPath("e2b_exec"))
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
