package shellquote

import (
	"os/exec"
	"testing"
)

// Every quoted word comes back from a real shell as it was.
func TestQuoteSurvivesTheShell(t *testing.T) {
	for _, s := range []string{"/home/user/a.txt", "", "two words", "it's", `$(rm -rf /); "x" \ *`, "new\nline"} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) = %s came back as %q", s, Quote(s), out)
		}
	}
	if got := Quote("/plain/path-1.txt"); got != "/plain/path-1.txt" {
		t.Errorf("a plain path was quoted: %s", got)
	}
}
