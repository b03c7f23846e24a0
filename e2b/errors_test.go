package e2b

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An error's text keeps the head and the tail of a long E2B message (envd repeats a command it could not start,
// with the reason at the end) and leaves out the middle, so that a 2 MiB command is not a 2 MiB error.
func TestAPIErrorClipsLongMessages(t *testing.T) {
	msg := "error starting process '" + strings.Repeat("é", 1<<20) + "': fork/exec /usr/bin/setsid: argument list too long"
	text := (&APIError{Op: "envd Start", Status: 400, Code: "invalid_argument", Message: msg}).Error()
	if len(text) > 2*maxMessage {
		t.Fatalf("error text of %d bytes", len(text))
	}
	for _, want := range []string{"E2B API error (envd Start: 400 invalid_argument): error starting process 'éé", "bytes left out", "argument list too long"} {
		if !strings.Contains(text, want) {
			t.Errorf("%q lacks %q", text[:200], want)
		}
	}
	if !utf8.ValidString(text) {
		t.Errorf("error text is not valid UTF-8")
	}
	short := (&APIError{Op: "envd Stat", Status: 404, Message: "file not found"}).Error()
	if short != "E2B API error (envd Stat: 404): file not found" {
		t.Errorf("short message changed: %q", short)
	}
}
