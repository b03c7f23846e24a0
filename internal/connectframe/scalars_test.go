package connectframe

import "testing"

func TestIntegerText(t *testing.T) {
	for in, want := range map[string]string{`3526`: "3526", `"3526"`: "3526", ` "-1" `: "-1", `1e3`: "1e3", `"x"`: "x", `true`: "true"} {
		if got, null := IntegerText([]byte(in)); got != want || null {
			t.Errorf("IntegerText(%s) = %q, %v; want %q", in, got, null, want)
		}
	}
	if _, null := IntegerText([]byte(` null`)); !null {
		t.Error("null is not null")
	}
}

func TestDecodeBytes(t *testing.T) {
	for in, want := range map[string]string{"aGkK": "hi\n", "aGk=": "hi", "aGk": "hi", "-_8": "\xfb\xff", "+/8=": "\xfb\xff", "": ""} {
		if got, err := DecodeBytes(in); err != nil || string(got) != want {
			t.Errorf("DecodeBytes(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"!!", "+/-_", "a"} {
		if got, err := DecodeBytes(bad); err == nil {
			t.Errorf("DecodeBytes(%q) = %q, want an error", bad, got)
		}
	}
}
