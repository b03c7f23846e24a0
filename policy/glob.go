package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// globMode selects how '*' and '?' treat the '/' separator.
type globMode int

const (
	// globText: '*' matches any run of characters, '/', spaces and newlines included.
	// Used for tool names, commands and templates.
	globText globMode = iota
	// globPath: '*' and '?' stay within one path segment and '**' as a whole segment
	// spans any number of directories (zero included).
	globPath
)

// glob is a compiled pattern. Patterns are translated to RE2 regular expressions so
// that matching is linear in the input whatever the pattern: a policy must never be
// a way to make the server spin.
type glob struct {
	src string
	re  *regexp.Regexp
}

func (g glob) match(s string) bool { return g.re.MatchString(s) }

func (g glob) String() string { return g.src }

// maxPatternBytes bounds a single pattern; real patterns are a few dozen bytes.
const maxPatternBytes = 4096

// compileGlob translates a glob pattern. Syntax: '*', '?', '[abc]', '[a-z]', '[!a]'
// (or '[^a]'), '\x' for a literal x, and in path mode '**' as a whole segment.
// Every pattern is anchored: it must match the whole string.
func compileGlob(pat string, mode globMode) (glob, error) {
	if pat == "" {
		return glob{}, errors.New("empty pattern")
	}
	if len(pat) > maxPatternBytes {
		return glob{}, fmt.Errorf("pattern longer than %d bytes", maxPatternBytes)
	}
	if !utf8.ValidString(pat) {
		return glob{}, errors.New("pattern is not valid UTF-8")
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	star, one := `.*`, `.`
	if mode == globPath {
		star, one = `[^/]*`, `[^/]`
	}
	for i := 0; i < len(pat); {
		c := pat[i]
		switch {
		case mode == globPath && strings.HasPrefix(pat[i:], "**"):
			// '**' must be a whole segment: "a**" or "**b" is almost certainly a typo
			// for "a*" or "**/b", and silently guessing would widen or narrow a rule.
			startOK := i == 0 || pat[i-1] == '/'
			end := i + 2
			endOK := end == len(pat) || pat[end] == '/'
			if !startOK || !endOK {
				return glob{}, fmt.Errorf("%q: ** must be a whole path segment (like /home/**/x)", pat)
			}
			switch {
			case end == len(pat) && i == 0:
				b.WriteString(`.*`)
			case end == len(pat):
				// "dir/**": the directory itself and everything below it. The '/'
				// before '**' was already written; make it part of the optional tail.
				s := b.String()
				b.Reset()
				b.WriteString(strings.TrimSuffix(s, `/`))
				b.WriteString(`(?:/.*)?`)
			default:
				// "**/" (leading or in the middle): zero or more whole segments.
				b.WriteString(`(?:.*/)?`)
				end++ // consume the '/'
			}
			i = end
		case c == '*':
			b.WriteString(star)
			i++
		case c == '?':
			b.WriteString(one)
			i++
		case c == '\\':
			if i+1 >= len(pat) {
				return glob{}, fmt.Errorf("%q: trailing backslash", pat)
			}
			r, size := utf8.DecodeRuneInString(pat[i+1:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			i += 1 + size
		case c == '[':
			class, n, err := translateClass(pat[i:], mode)
			if err != nil {
				return glob{}, fmt.Errorf("%q: %v", pat, err)
			}
			b.WriteString(class)
			i += n
		default:
			r, size := utf8.DecodeRuneInString(pat[i:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			i += size
		}
	}
	b.WriteString(`)$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return glob{}, fmt.Errorf("%q: %v", pat, err)
	}
	return glob{src: pat, re: re}, nil
}

// translateClass turns a bracket expression at the start of s into a regexp class and
// reports how many bytes of s it used.
func translateClass(s string, mode globMode) (string, int, error) {
	i := 1
	var b strings.Builder
	b.WriteString("[")
	negate := false
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		negate = true
		b.WriteString("^")
		i++
	}
	items := 0
	for {
		if i >= len(s) {
			return "", 0, errors.New("unclosed [")
		}
		if s[i] == ']' && items > 0 {
			i++
			break
		}
		lo, n, err := classRune(s[i:])
		if err != nil {
			return "", 0, err
		}
		i += n
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi, n, err = classRune(s[i+1:])
			if err != nil {
				return "", 0, err
			}
			if hi < lo {
				return "", 0, fmt.Errorf("bad range %c-%c", lo, hi)
			}
			i += 1 + n
		}
		fmt.Fprintf(&b, `\x{%x}`, lo)
		if hi != lo {
			fmt.Fprintf(&b, `-\x{%x}`, hi)
		}
		items++
	}
	if negate && mode == globPath {
		// A negated class must not let a single-character match cross a directory.
		b.WriteString(`/`)
	}
	b.WriteString("]")
	return b.String(), i, nil
}

func classRune(s string) (rune, int, error) {
	if s[0] == '\\' {
		if len(s) < 2 {
			return 0, 0, errors.New("trailing backslash")
		}
		r, n := utf8.DecodeRuneInString(s[1:])
		return r, 1 + n, nil
	}
	r, n := utf8.DecodeRuneInString(s)
	return r, n, nil
}

// literalDir is the leading part of a path pattern that holds no wildcard, unescaped: "/home/me/.ssh" of
// "/home/me/.ssh/**" and of "/home/me/.ssh/id_*", "/" of "/**", "" of "**/secrets/**". Whatever the pattern
// matches is it or under it.
func literalDir(pat string) string {
	var out []string
	for _, seg := range strings.Split(pat, "/") {
		lit, ok := unescapeLiteral(seg)
		if !ok {
			break
		}
		out = append(out, lit)
	}
	if len(out) == 1 && out[0] == "" {
		return "/"
	}
	return strings.Join(out, "/")
}

// unescapeLiteral returns a pattern segment without its escapes, ok false when it holds a wildcard.
func unescapeLiteral(seg string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; c {
		case '*', '?', '[':
			return "", false
		case '\\':
			if i+1 < len(seg) {
				i++
				b.WriteByte(seg[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// escapeGlob makes s a pattern that matches s only.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
