package envd_test

import (
	"encoding/json"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// Integers read as protojson reads them: numbers or strings, integral exponents, null as the default; a value out
// of the field's range is refused.
func TestIntegers(t *testing.T) {
	for in, want := range map[string]int64{`"3526"`: 3526, `3526`: 3526, `"-1"`: -1, `1e3`: 1000, `"1e3"`: 1000,
		`null`: 0, ` 7 `: 7, `-9223372036854775808`: -1 << 63} {
		var v envd.Int64
		if err := json.Unmarshal([]byte(in), &v); err != nil || int64(v) != want {
			t.Errorf("Int64 from %s = %d, %v; want %d", in, v, err, want)
		}
	}
	for in, want := range map[string]int32{`"-7"`: -7, `2147483647`: 1<<31 - 1, `-2e1`: -20} {
		var v envd.Int32
		if err := json.Unmarshal([]byte(in), &v); err != nil || int32(v) != want {
			t.Errorf("Int32 from %s = %d, %v; want %d", in, v, err, want)
		}
	}
	for in, want := range map[string]uint32{`"512"`: 512, `4294967295`: 1<<32 - 1, `5e2`: 500} {
		var v envd.Uint32
		if err := json.Unmarshal([]byte(in), &v); err != nil || uint32(v) != want {
			t.Errorf("Uint32 from %s = %d, %v; want %d", in, v, err, want)
		}
	}
	bad := map[string]any{
		`"x"`: new(envd.Int64), `1.5`: new(envd.Int64), `true`: new(envd.Int64), `"99999999999999999999"`: new(envd.Int64),
		`2147483648`: new(envd.Int32), `-1`: new(envd.Uint32), `4294967296`: new(envd.Uint32), `1e10`: new(envd.Uint32),
		`-1e0`: new(envd.Uint32), `"1.5e0"`: new(envd.Uint32),
	}
	for in, v := range bad {
		if err := json.Unmarshal([]byte(in), v); err == nil {
			t.Errorf("%T accepted %s", v, in)
		}
	}
	if data, err := json.Marshal(envd.Int64(-5)); err != nil || string(data) != `"-5"` {
		t.Errorf("Int64 is written %s, %v; want a string", data, err)
	}
}

// Bytes are written in standard base64 with padding, nil as "" (a set field is never null), and read in either
// alphabet, padded or not.
func TestBytes(t *testing.T) {
	for in, want := range map[string]string{`"aGkK"`: "hi\n", `"aGk="`: "hi", `"aGk"`: "hi", `"-_8"`: "\xfb\xff",
		`"+/8="`: "\xfb\xff", `""`: ""} {
		var v envd.Bytes
		if err := json.Unmarshal([]byte(in), &v); err != nil || string(v) != want {
			t.Errorf("Bytes from %s = %q, %v; want %q", in, v, err, want)
		}
	}
	for _, bad := range []string{`"!!"`, `"+/-_"`, `"a"`, `3`} {
		var v envd.Bytes
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("Bytes accepted %s", bad)
		}
	}
	for b, want := range map[string]string{"\xfb\xff": `"+/8="`, "": `""`} {
		if data, err := json.Marshal(envd.Bytes(b)); err != nil || string(data) != want {
			t.Errorf("Bytes(%q) is written %s, %v; want %s", b, data, err, want)
		}
	}
	if data, err := json.Marshal(envd.Bytes(nil)); err != nil || string(data) != `""` {
		t.Errorf("nil Bytes is written %s, %v; want \"\"", data, err)
	}
}

// Enums read by name or by number.
func TestEnums(t *testing.T) {
	for in, want := range map[string]envd.Signal{`"SIGNAL_SIGKILL"`: envd.SignalSIGKILL, `9`: envd.SignalSIGKILL,
		`15`: envd.SignalSIGTERM, `0`: envd.SignalUnspecified, `3`: "3"} {
		var s envd.Signal
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("Signal from %s = %q, %v; want %q", in, s, err, want)
		}
	}
	for in, want := range map[string]envd.FileType{`"FILE_TYPE_DIRECTORY"`: envd.FileTypeDirectory, `2`: envd.FileTypeDirectory,
		`"FILE_TYPE_UNSPECIFIED"`: envd.FileTypeUnspecified, `"FILE_TYPE_SOCKET"`: envd.FileTypeUnspecified, `9`: ""} {
		var ft envd.FileType
		if err := json.Unmarshal([]byte(in), &ft); err != nil || ft != want {
			t.Errorf("FileType from %s = %q, %v; want %q", in, ft, err, want)
		}
	}
}

// The frames docs/e2b.md shows a real envd sending come back byte for byte: envd writes members in
// field order, without spaces.
func TestEnvdsFramesComeBackAsTheyAre(t *testing.T) {
	for _, frame := range []string{
		`{"event":{"start":{"pid":512}}}`,
		`{"event":{"data":{"stdout":"aGVsbG8K"}}}`,
		`{"event":{"keepalive":{}}}`,
		`{"event":{"end":{"exitCode":1,"exited":true,"status":"exit status 1","error":"exit status 1"}}}`,
		`{"event":{"end":{"exited":true,"status":"exit status 0"}}}`,
		`{"event":{"end":{"exitCode":-1,"status":"signal: killed","error":"signal: killed"}}}`,
	} {
		var m envd.EventMessage
		if err := json.Unmarshal([]byte(frame), &m); err != nil {
			t.Errorf("%s: %v", frame, err)
			continue
		}
		if again, err := json.Marshal(m); err != nil || string(again) != frame {
			t.Errorf("%s comes back as %s, %v", frame, again, err)
		}
	}
}
