package envd

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Proto3 JSON scalars that protojson writes in one form and reads in several.

// Int64 is an int64 field: written as a JSON string, as protojson writes 64-bit integers.
type Int64 int64

// MarshalJSON writes v as a string.
func (v Int64) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(v), 10) + `"`), nil
}

// UnmarshalJSON reads v from a number or a string.
func (v *Int64) UnmarshalJSON(b []byte) error { return readInteger(v, b, 64, true) }

// Int32 is an int32 or sint32 field, written as a number.
type Int32 int32

// UnmarshalJSON reads v from a number or a string.
func (v *Int32) UnmarshalJSON(b []byte) error { return readInteger(v, b, 32, true) }

// Uint32 is a uint32 field, written as a number.
type Uint32 uint32

// UnmarshalJSON reads v from a number or a string.
func (v *Uint32) UnmarshalJSON(b []byte) error { return readInteger(v, b, 32, false) }

// readInteger sets *v to the integer b holds, leaving it as it is for null.
func readInteger[T Int64 | Int32 | Uint32](v *T, b []byte, bits int, signed bool) error {
	n, null, err := parseInteger(b, bits, signed)
	if err != nil || null {
		return err
	}
	*v = T(n)
	return nil
}

// parseInteger reads a proto3 JSON integer of bits bits: a JSON number or a string holding one, in exponent form
// too when its value is integral (1e3), as protojson reads it. null leaves the field at its default.
func parseInteger(b []byte, bits int, signed bool) (n int64, null bool, err error) {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return 0, true, nil
	}
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	kind := "uint"
	if signed {
		kind = "int"
	}
	invalid := fmt.Errorf("invalid value for %s%d field: %s", kind, bits, b)
	if signed {
		n, err = strconv.ParseInt(s, 10, bits)
	} else {
		var u uint64
		u, err = strconv.ParseUint(s, 10, bits)
		n = int64(u)
		if err == nil && u > 1<<63-1 {
			return 0, false, invalid
		}
	}
	if err == nil {
		return n, false, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, false, invalid
	}
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr != nil || f != float64(int64(f)) {
		return 0, false, invalid
	}
	n = int64(f)
	if signed && (n < -(1<<(bits-1)) || n > 1<<(bits-1)-1) || !signed && (n < 0 || n > 1<<bits-1) {
		return 0, false, invalid
	}
	return n, false, nil
}

// Bytes is a bytes field: written in standard base64 with padding (nil as ""), read in the standard or the
// URL-safe alphabet, padded or not.
type Bytes []byte

// MarshalJSON writes v in standard base64; nil is "", never null, since a set bytes field is a string.
func (v Bytes) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(v))+2)
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, v)
	return append(out, '"'), nil
}

// UnmarshalJSON reads v from base64 in either alphabet, padded or not.
func (v *Bytes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("invalid value for bytes field")
	}
	out, err := decodeBase64(s)
	if err != nil {
		return fmt.Errorf("invalid value for bytes field: %v", err)
	}
	*v = out
	return nil
}

// decodeBase64 decodes the string of a proto3 JSON bytes field: base64 in the standard or the URL-safe alphabet,
// padded or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	return enc.DecodeString(s)
}
