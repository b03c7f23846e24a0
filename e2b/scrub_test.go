package e2b

import (
	"strings"
	"testing"
)

// A secret is hidden whole, cut (at the end of a clipped message, at the start of the next chunk) and in pieces;
// text around it, and text that shares a few characters with it by chance, is kept.
func TestScrub(t *testing.T) {
	tok := "f3a9c1e07b5d4a2e9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d"
	for in, want := range map[string]string{
		"token " + tok + " end":                  "token [redacted] end",
		"cut: " + tok[:56]:                       "cut: [redacted]",
		tok[40:] + " starts mid-token":           "[redacted] starts mid-token",
		tok[:32] + "\n" + tok[32:]:               "[redacted]\n[redacted]",
		"twice " + tok + tok:                     "twice [redacted][redacted]",
		"f3a9c1e short pieces stay":              "f3a9c1e short pieces stay",
		"plain text with no secret in it at all": "plain text with no secret in it at all",
	} {
		if got := scrub(in, tok, ""); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	if got := scrub(strings.Repeat("a", 100), "aaaaaaaaaaaa"); strings.Contains(got, strings.Repeat("a", minSecretRun)) {
		t.Errorf("a secret of one repeated letter: %q", got)
	}
}
