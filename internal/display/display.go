// Package display makes text that came from a caller safe and honest to show a human: in a terminal (the audit
// log, the approval queue) or in a client's approval dialog. Nothing a caller sends may forge a line, command the
// terminal, or hide part of itself from the person reading it.
package display

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Escape writes every character that is not simply shown as a Go escape: newlines and tabs (which would forge
// rows or shift columns), ESC and the C1 controls (which a terminal obeys), format characters such as the
// bidirectional overrides (which reorder what is shown), the line and paragraph separators, and invalid UTF-8
// (as \xNN). Everything else is kept as it is.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case Unsafe(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if Unsafe(r) {
			return true
		}
	}
	return false
}

// Unsafe reports the characters a terminal does not simply show: controls (C0, DEL, C1), format characters
// (bidirectional overrides, zero-width ones) and the line and paragraph separators.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// JSONLine makes encoded JSON safe for a terminal: the characters Escape escapes and encoding/json leaves raw
// (DEL, the C1 controls, the format characters) become \uXXXX escapes, which decode to the same value. A JSON text
// has such characters only inside strings; newlines (between values) are kept.
func JSONLine(b []byte) []byte {
	if !needsEscape(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for _, r := range string(b) {
		if !Unsafe(r) || r == '\n' {
			out = utf8.AppendRune(out, r)
			continue
		}
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

// minRun is the shortest run of one whitespace character that Readable folds into a count.
const minRun = 8

// Readable shows s to a human deciding on it, in at most about max bytes: escaped (Escape), every run of
// minRun or more of one whitespace character folded into a marker such as "[4096 spaces]" (padding cannot push a
// command's tail out of sight), and, when still longer than max, its head and its tail with the number of bytes
// between them, so that the end of a value, where an appended "; curl ... | sh" would be, is always shown.
// max <= 0 means no bound.
func Readable(s string, max int) string {
	s = Escape(foldRuns(s))
	if max <= 0 || len(s) <= max {
		return s
	}
	tailLen := max / 3
	headLen := max - tailLen
	head, tail := s[:cutBack(s, headLen)], s[cutForward(s, len(s)-tailLen):]
	return fmt.Sprintf("%s ...[%d bytes not shown]... %s", head, len(s)-len(head)-len(tail), tail)
}

// foldRuns replaces each run of minRun or more of one whitespace character by a marker naming it and its length.
func foldRuns(s string) string {
	var b strings.Builder
	folded := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n := 1
		if unicode.IsSpace(r) {
			for j := i + size; j < len(s) && strings.HasPrefix(s[j:], s[i:i+size]); j += size {
				n++
			}
		}
		if n >= minRun {
			if !folded {
				b.Grow(len(s))
				b.WriteString(s[:i])
				folded = true
			}
			fmt.Fprintf(&b, "[%d %s]", n, runName(r))
		} else if folded {
			b.WriteString(s[i : i+n*size])
		}
		i += n * size
	}
	if !folded {
		return s
	}
	return b.String()
}

func runName(r rune) string {
	switch r {
	case ' ':
		return "spaces"
	case '\t':
		return "tabs"
	case '\n':
		return "newlines"
	case '\r':
		return "carriage returns"
	}
	return fmt.Sprintf("× %U", r)
}

// cutBack returns the largest rune boundary <= n; cutForward the smallest >= n.
func cutBack(s string, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

func cutForward(s string, n int) int {
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return n
}

// Prefix shows at most the first max bytes of s, escaped (Escape), with s's whole length when it was cut: for
// echoing a bad ID or name in an error, so that the caller sees which one was refused, without a megabyte of it
// stored in the audit log and sent back.
func Prefix(s string, max int) string {
	if len(s) <= max {
		return Escape(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", Escape(s[:cutBack(s, max)]), len(s))
}
