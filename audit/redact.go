package audit

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

const (
	// Redacted replaces a secret.
	Redacted = "[redacted]"
	// MaxStringBytes is the longest string value kept whole; longer ones are clipped
	// with a marker saying how much was dropped.
	MaxStringBytes = 512

	// scanWindow is how much of a long string is searched for secrets before it is
	// clipped: enough to hold whole any token that starts within the kept part (a
	// PEM block cut at the window is still caught, its pattern accepts the end of
	// text), without scanning megabytes of file content on every call.
	scanWindow = MaxStringBytes + 4<<10
	// maxItems bounds lists and objects, so that one call cannot make a huge line.
	maxItems = 100
	maxDepth = 32
)

// secretPattern finds one kind of secret. repl is a regexp replacement template;
// keep, if set, spares a match that is not a secret after all. hints are lower-case
// literals of which any match must contain one: a cheap test that spares running the
// expression over text that cannot match (almost all text). token, for a pattern
// whose match is a whole credential, names it for a human (see TokenFormat); whole,
// if set, is the expression a whole value of it matches, where re also finds a
// part of one.
type secretPattern struct {
	re    *regexp.Regexp
	repl  string
	keep  func(string) bool
	hints []string
	token string
	whole string
}

// The patterns are compiled once and only read; regexp values are safe for
// concurrent use.
var secretPatterns = []secretPattern{
	// PEM private keys, also when the block is cut off.
	{re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z)`),
		repl:  "[redacted private key]",
		hints: []string{"private key-----"}, token: "a private key",
		// whole: only a complete block (a cut one may be followed by anything)
		whole: `-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[A-Za-z0-9+/=\s:,-]*-----END[A-Z0-9 ]*PRIVATE KEY-----`},
	// E2B API keys.
	{re: regexp.MustCompile(`e2b_[0-9a-fA-F]{20,}`), repl: Redacted, hints: []string{"e2b_"}, token: "an E2B API key"},
	// sk-... (OpenAI, Anthropic), sk_live_... (Stripe), sk_e2b_...: only with a digit,
	// so that words like "sk-learn-style-names" stay readable.
	{re: regexp.MustCompile(`\bsk[-_][A-Za-z0-9_-]{16,}`), repl: Redacted, keep: noDigit, hints: []string{"sk-", "sk_"},
		token: "an API key (sk-…)"},
	// GitHub tokens.
	{re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), repl: Redacted,
		hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, token: "a GitHub token"},
	// Slack, Hugging Face, Google API keys, AWS access key IDs.
	{re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), repl: Redacted, hints: []string{"xox"},
		token: "a Slack token"},
	{re: regexp.MustCompile(`\bhf_[A-Za-z0-9]{20,}`), repl: Redacted, hints: []string{"hf_"}, token: "a Hugging Face " +
		"token"},
	{re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`), repl: Redacted, hints: []string{"aiza"},
		token: "a Google API key"},
	{re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), repl: Redacted, hints: []string{"akia", "asia"},
		token: "an AWS access key ID"},
	// JSON Web Tokens.
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`), repl: Redacted,
		hints: []string{"eyj"}, token: "a JSON Web Token"},
	// Authorization headers and bearer tokens.
	{re: regexp.MustCompile(`(?i)(\bauthorization["']?\s*[:=]\s*["']?)(?:(?:basic|bearer|token|digest)\s+)?[^\s"']+`),
		repl:  "${1}" + Redacted,
		hints: []string{"authorization"}},
	{re: regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`), repl: "${1} " + Redacted,
		hints: []string{"bearer"}},
	// Passwords in URLs: scheme://user:password@host.
	{re: regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@`), repl: "${1}:" + Redacted + "@",
		hints: []string{"://"}},
	// name=value and name: value where the name says secret: API_KEY=..., "password": "...".
	{re: regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)["']?\s*[:=]\s*)(?:\[redacted[^\]]*\]|"[^"\n]*"|'[^'\n]*'|[^\s"'&;,|)}\]]+)`), repl: "${1}" + Redacted,
		hints: []string{"password", "passwd", "secret", "token", "apikey", "api_key", "api-key", "accesskey",
			"access_key", "access-key",
			"privatekey", "private_key", "private-key", "credential"}},
}

// wholeTokens are the patterns that name a credential, anchored to match a whole value.
var wholeTokens = func() []secretPattern {
	var out []secretPattern
	for _, p := range secretPatterns {
		if p.token != "" {
			whole := p.whole
			if whole == "" {
				whole = p.re.String()
			}
			p.re = regexp.MustCompile(`\A(?:` + whole + `)\z`)
			out = append(out, p)
		}
	}
	return out
}()

// TokenFormat names the kind of credential s is, when s (without surrounding
// whitespace) is exactly one of a known format: an E2B key, sk-..., a GitHub token, a
// JWT, a private key, ...; "" otherwise. Unlike Redact, it says nothing of text
// that merely contains or names a secret: it is for showing a value to a human who
// must judge it, where only a bare credential can be hidden without hiding what the
// value does.
func TokenFormat(s string) string {
	s = strings.TrimSpace(s)
	lower := strings.ToLower(s)
	for _, p := range wholeTokens {
		if containsAny(lower, p.hints) && p.re.MatchString(s) && (p.keep == nil || !p.keep(s)) {
			return p.token
		}
	}
	return ""
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func noDigit(s string) bool { return !strings.ContainsAny(s, "0123456789") }

// Redact returns a copy of a call's arguments fit for the audit log; args is not
// modified. The values of env_vars are replaced by "[redacted]" (the names are
// kept); so is every string under a key that names a secret (password, token,
// api_key, ...); any string containing something shaped like a secret (an E2B key,
// a bearer token, sk-..., ghp_..., a private key, a password in a URL, API_KEY=...)
// has that part replaced; strings longer than MaxStringBytes, file content
// included, are clipped with a marker saying how many bytes were dropped; lists and
// objects keep their first 100 items.
func Redact(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	out, _ := redactValue(args, 0).(map[string]any)
	return out
}

func redactValue(v any, depth int) any {
	if depth > maxDepth {
		return "[too deep]"
	}
	switch x := v.(type) {
	case nil, bool, json.Number:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x) // JSON has no NaN; keep the fact, not an encoding error
		}
		return x
	case string:
		return redactString(x)
	case map[string]any:
		return redactMap(x, depth)
	case []any:
		n := min(len(x), maxItems)
		out := make([]any, 0, n+1)
		for _, item := range x[:n] {
			out = append(out, redactValue(item, depth+1))
		}
		if len(x) > n {
			out = append(out, fmt.Sprintf("[%d more items]", len(x)-n))
		}
		return out
	}
	// Not a JSON-decoded value (a caller built the arguments by hand): take its JSON
	// form, so that structs, typed maps and numbers are treated like the rest.
	raw, err := json.Marshal(v)
	if err != nil {
		return "[unencodable " + fmt.Sprintf("%T", v) + "]"
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return "[unencodable " + fmt.Sprintf("%T", v) + "]"
	}
	return redactValue(generic, depth)
}

func redactMap(m map[string]any, depth int) map[string]any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // which items survive the bound must not depend on map order
	out := make(map[string]any, min(len(keys), maxItems)+1)
	for i, k := range keys {
		if i == maxItems {
			out["[more]"] = fmt.Sprintf("[%d more keys]", len(keys)-maxItems)
			break
		}
		v := m[k]
		switch {
		case k == "env_vars":
			out[k] = redactEnv(v)
		case sensitiveKey(k):
			out[redactString(k)] = redactAll(v, depth+1)
		default:
			out[redactString(k)] = redactValue(v, depth+1)
		}
	}
	return out
}

// redactEnv keeps the variable names, which say what a sandbox was given, and
// drops every value, which may be anything from a path to a production password.
// Like every other object it keeps at most maxItems names (the first in sorted
// order) and says how many more there were.
func redactEnv(v any) any {
	var names []string
	switch x := v.(type) {
	case nil:
		return nil
	case map[string]any:
		for k := range x {
			names = append(names, k)
		}
	case map[string]string:
		for k := range x {
			names = append(names, k)
		}
	default:
		return Redacted
	}
	slices.Sort(names)
	out := make(map[string]any, min(len(names), maxItems)+1)
	for i, k := range names {
		if i == maxItems {
			out["[more]"] = fmt.Sprintf("[%d more variables]", len(names)-maxItems)
			break
		}
		out[redactString(k)] = Redacted
	}
	return out
}

// redactAll replaces every string under a secret-named key; numbers and booleans
// are kept, as they are not secrets and say something (max_tokens: 100).
func redactAll(v any, depth int) any {
	if depth > maxDepth {
		return "[too deep]"
	}
	switch x := v.(type) {
	case nil, bool, float64, json.Number:
		return redactValue(x, depth)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[redactString(k)] = redactAll(item, depth+1)
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, item := range x {
			out = append(out, redactAll(item, depth+1))
		}
		return out
	}
	return Redacted
}

// sensitiveKey reports whether a key names a secret, making its every string value one.
func sensitiveKey(k string) bool {
	lk := strings.ToLower(k)
	for _, w := range [...]string{
		"password", "passwd", "secret", "token", "api_key", "apikey", "api-key",
		"authorization", "credential", "private_key", "access_key",
	} {
		if strings.Contains(lk, w) {
			return true
		}
	}
	return false
}

// redactString removes secrets from s, then clips it. Secrets are removed first, so
// a secret cut in two by the clip cannot leave a recognisable half behind.
func redactString(s string) string {
	if s == "" {
		return s
	}
	scan, rest := s, ""
	if len(s) > scanWindow {
		scan, rest = s[:scanWindow], s[scanWindow:]
	}
	lower := strings.ToLower(scan)
	for _, p := range secretPatterns {
		if !containsAny(lower, p.hints) {
			continue
		}
		if p.keep == nil {
			scan = p.re.ReplaceAllString(scan, p.repl)
			continue
		}
		scan = p.re.ReplaceAllStringFunc(scan, func(m string) string {
			if p.keep(m) {
				return m
			}
			return p.re.ReplaceAllString(m, p.repl)
		})
	}
	if rest == "" && len(scan) <= MaxStringBytes {
		return scan
	}
	cut := min(MaxStringBytes, len(scan))
	for cut > 0 && cut < len(scan) && !utf8.RuneStart(scan[cut]) {
		cut--
	}
	dropped := len(scan) - cut + len(rest)
	return fmt.Sprintf("%s...[%d bytes clipped]", scan[:cut], dropped)
}
