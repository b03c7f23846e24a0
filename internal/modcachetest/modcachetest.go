// Package modcachetest gives tests a real repository to sync: Go modules of the module cache, copied.
package modcachetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repository is the modules the sync tests and benchmarks copy: about 2,000 files and 53 MB with their tests, each
// under the directory name it maps to.
var Repository = map[string]string{"text": "golang.org/x/text@v0.42.0", "sys": "golang.org/x/sys@v0.48.0",
	"protobuf": "google.golang.org/protobuf@v1.36.12"}

// Copy copies Go modules of the module cache (read-only there) into dir as a writable tree, each under its name;
// the test is skipped, saying why, where the module cache or a module is missing.
func Copy(t testing.TB, dir string, modules map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("no Go module cache: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	for name, mod := range modules {
		src := filepath.Join(cache, mod)
		if _, err := os.Stat(src); err != nil {
			t.Skipf("module %s is not in the module cache", mod)
		}
		if out, err := exec.Command("cp", "-r", src, filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", mod, err, out)
		}
	}
	if out, err := exec.Command("chmod", "-R", "u+w", dir).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v\n%s", err, out)
	}
}
