package tests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The secret scan that every test runs at its end must find a secret wherever it is: in a process's output, in a
// text file, inside a binary file. Without this, a scan that never matched would pass every test.
func TestSecretScanFindsLeaks(t *testing.T) {
	key, token := newAPIKey(), randomHex(16)
	secrets := map[string]string{key: "key", token: "token"}
	dir := t.TempDir()
	clean := &capture{name: "clean"}
	clean.Write([]byte("nothing to see: e2b_" + key[4:10] + "\n"))
	if leaks := findLeaks(secrets, []*capture{clean}, dir); len(leaks) != 0 {
		t.Fatalf("clean output reported as leaks: %v", leaks)
	}

	leaky := &capture{name: "stderr"}
	leaky.Write([]byte("level=INFO msg=started key=" + key + "\n"))
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	bin := append([]byte{0, 1, 2, 0xff}, token...)
	if err := os.WriteFile(filepath.Join(dir, "state", "state.db"), append(bin, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	got := findLeaks(secrets, []*capture{clean, leaky}, dir)
	want := []string{"key in stderr", "token in " + filepath.Join(dir, "state", "state.db")}
	if !slices.Equal(got, want) {
		t.Fatalf("findLeaks = %q, want %q", got, want)
	}
	for _, l := range got {
		if strings.Contains(l, key) || strings.Contains(l, token) {
			t.Fatalf("a leak report repeats the secret: %q", l)
		}
	}
}
