package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The secret scan that every test runs at its end must find a secret wherever it is: in a process's output, in a
// text file, inside a binary file. Without this, a scan that never matched would pass every test.
func TestSecretScanFindsLeaks(t *testing.T) {
	t.Parallel()
	key, token := newAPIKey(), randomHex(16)
	secrets := map[string]string{key: "key", token: "token"}
	dir := t.TempDir()
	clean := &capture{name: "clean"}
	clean.Write([]byte("nothing to see: e2b_" + key[4:10] + "\n"))
	if leaks := findLeaks(secrets, []*capture{clean}, dir); len(leaks) != 0 {
		t.Fatalf("clean output reported as leaks: %v", leaks)
	}

	leaky := &capture{name: "stderr"}
	leaky.Write([]byte("level=INFO msg=started key=" + key + "\n"))
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	bin := append([]byte{0, 1, 2, 0xff}, token...)
	if err := os.WriteFile(filepath.Join(dir, "state", "state.db"), append(bin, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	got := findLeaks(secrets, []*capture{clean, leaky}, dir)
	want := []string{"key (raw) in stderr", "token (raw) in " + filepath.Join(dir, "state", "state.db")}
	if !slices.Equal(got, want) {
		t.Fatalf("findLeaks = %q, want %q", got, want)
	}
	for _, l := range got {
		if strings.Contains(l, key) || strings.Contains(l, token) {
			t.Fatalf("a leak report repeats the secret: %q", l)
		}
	}

	// Encoded, a secret is found as well: base64 as JSON writes a byte field (at any alignment inside a longer
	// value, either alphabet), hex, and URL escapes.
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"base64 field":       {fmt.Appendf(nil, `{"sealed":%q}`, base64.StdEncoding.EncodeToString([]byte(token))), "token (base64)"},
		"base64 inside, +1":  {[]byte(base64.StdEncoding.EncodeToString([]byte("x" + token + "tail"))), "token (base64)"},
		"base64 inside, +2":  {[]byte(base64.StdEncoding.EncodeToString([]byte("xy" + key))), "key (base64)"},
		"base64url inside":   {[]byte(base64.RawURLEncoding.EncodeToString([]byte("\xff\xfe" + key + "\xfb"))), "key (base64"}, // either alphabet's form may match
		"hex":                {[]byte(hex.EncodeToString([]byte(key))), "key (hex)"},
		"HEX":                {[]byte(strings.ToUpper(hex.EncodeToString([]byte(token)))), "token (hex)"},
		"query escaped":      {[]byte("GET /x?k=" + url.QueryEscape(key)), "key (raw)"},
		"every byte escaped": {[]byte(escapeAll(token)), "token (URL-escaped)"},
	} {
		enc := &capture{name: name}
		enc.Write(tc.data)
		if got := findLeaks(secrets, []*capture{clean, enc}, t.TempDir()); len(got) != 1 || !strings.HasPrefix(got[0], tc.want) || !strings.HasSuffix(got[0], " in "+name) {
			t.Errorf("%s: findLeaks = %q, want one leak %q… in %s", name, got, tc.want, name)
		}
	}
}

// escapeAll percent-encodes every byte of s.
func escapeAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02x", s[i])
	}
	return b.String()
}

// BenchmarkFindLeaks is the end of a run's scan: every secret of a run (a hundred and sixty keys and tokens) looked
// for in 16 MiB of output that holds none of them.
func BenchmarkFindLeaks(b *testing.B) {
	secrets := map[string]string{}
	for i := range 80 {
		secrets[newAPIKey()] = fmt.Sprint("key ", i)
		secrets[randomHex(16)] = fmt.Sprint("token ", i)
	}
	var out bytes.Buffer
	for out.Len() < 16<<20 {
		fmt.Fprintf(&out, "time=2026-12-06T04:30:00Z level=INFO msg=\"tool call\" tool=e2b_exec sandbox=%s took=%dms\n", randomHex(10), out.Len()%997)
	}
	c := &capture{name: "output"}
	c.Write(out.Bytes())
	b.SetBytes(int64(out.Len()))
	for b.Loop() {
		if leaks := findLeaks(secrets, []*capture{c}); len(leaks) != 0 {
			b.Fatal(leaks)
		}
	}
}

// A file is scanned a piece at a time (a run's directory may hold a sandbox's gigabytes, which read whole ended a
// run out of memory): a secret cut in two where a piece ends (4 MiB read after what the piece carries of the one
// before) is still found, as is one in the file's last bytes. The secrets straddle every place a piece could end.
func TestSecretScanFindsLeaksAcrossPieces(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{}
	var want []string
	const mib4 = 4 << 20
	carried := newLeakMatcher(map[string]string{newAPIKey(): ""}).longest - 1
	data := make([]byte, 2*mib4+carried+1000)
	dir := t.TempDir()
	path := filepath.Join(dir, "big.bin")
	for i, at := range []int{mib4, 2 * mib4, carried + mib4, carried + 2*mib4} {
		key := newAPIKey()
		copy(data[at-len(key)/2:], key)
		secrets[key] = fmt.Sprintf("cut at %d", i)
		want = append(want, fmt.Sprintf("cut at %d (raw) in %s", i, path))
	}
	last := randomHex(16)
	secrets[last] = "last"
	want = append(want, "last (raw) in "+path)
	if err := os.WriteFile(path, append(data, last...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := findLeaks(secrets, nil, dir); !slices.Equal(got, want) {
		t.Fatalf("leaks = %q, want %q", got, want)
	}
}
