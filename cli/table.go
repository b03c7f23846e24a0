package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// newTable starts a table of tab-separated columns with its header line, aligned the same in every command
// that lists things; Flush writes it.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// cell makes a value safe to print in a terminal, in a table or a line of text: every character that is not
// printable (newlines and tabs, which would forge rows or shift columns; ESC and the C1 controls, which a terminal
// obeys; the bidirectional overrides, which reorder what is shown; invalid UTF-8) is written as a Go escape
// (\n, \x1b, \u202e). Values that came from a caller (sandbox IDs, sessions, arguments, errors) always go
// through it.
func cell(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
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
		if unsafeRune(r) {
			return true
		}
	}
	return false
}

// unsafeRune reports the characters a terminal does not simply show: controls (C0, DEL, C1), format characters
// (bidirectional overrides, zero-width ones) and the line and paragraph separators.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// jsonLine makes one encoded JSON value safe for a terminal: the characters cell escapes, which encoding/json
// leaves raw (DEL, the C1 controls, the format characters), become \uXXXX escapes, which decode to the same
// value. Outside strings a JSON text has no such characters.
func jsonLine(b []byte) []byte {
	if !needsEscape(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for _, r := range string(b) {
		if unsafeRune(r) && r != '\n' {
			if r > 0xFFFF {
				hi, lo := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return out
}
