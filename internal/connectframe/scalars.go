package connectframe

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// Proto3 JSON writes some scalars in more than one form, and protojson reads every form; the client and the
// emulator read them by the same rules.

// IntegerText is the text of a proto3 JSON integer, which may be a JSON number or a string holding one; null tells
// a JSON null, which leaves the field at its default.
func IntegerText(b []byte) (text string, null bool) {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return "", true
	}
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	return s, false
}

// DecodeBytes decodes the string of a proto3 JSON bytes field: base64 in the standard or the URL-safe alphabet,
// padded or not.
func DecodeBytes(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	return enc.DecodeString(s)
}
