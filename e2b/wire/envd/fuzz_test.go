package envd_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// FuzzScalars reads arbitrary text as proto3 JSON's integers and bytes: no panic, an integer read is in its
// field's range and is what the text says, and bytes encoded in either alphabet, padded or not, decode to what was
// encoded.
func FuzzScalars(f *testing.F) {
	f.Add("aGVsbG8K", []byte("hello\n"))
	f.Add(`"-12"`, []byte{0xfb, 0xff})
	f.Add("null", []byte{})
	f.Add("4294967295", []byte{0})
	f.Fuzz(func(t *testing.T, text string, raw []byte) {
		var i64 envd.Int64
		var u32 envd.Uint32
		var i32 envd.Int32
		var b envd.Bytes
		if i64.UnmarshalJSON([]byte(text)) == nil && u32.UnmarshalJSON([]byte(text)) == nil && u32 != 0 &&
			int64(u32) != int64(i64) {
			t.Fatalf("%s reads as int64 %d but as uint32 %d", text, i64, u32)
		}
		if i32.UnmarshalJSON([]byte(text)) == nil && i64.UnmarshalJSON([]byte(text)) == nil && int64(i32) != int64(i64) {
			t.Fatalf("%s reads as int64 %d but as int32 %d", text, i64, i32)
		}
		_ = b.UnmarshalJSON([]byte(text))
		quoted := []byte(strconv.Quote(text))
		if json.Valid(quoted) {
			_ = b.UnmarshalJSON(quoted)
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding,
			base64.RawURLEncoding} {
			var got envd.Bytes
			if err := got.UnmarshalJSON([]byte(`"` + enc.EncodeToString(raw) + `"`)); err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("%x encoded and decoded: %x, %v", raw, got, err)
			}
		}
	})
}
