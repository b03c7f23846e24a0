package workspace

import (
	"bufio"
	"io"
	"path"
	"regexp"
	"strings"
)

// A pattern is one line of a .gitignore (or of a sync's exclude list), as git reads it: relative to the directory
// of its file, a negation when it starts with "!", for directories only when it ends with "/", matched against the
// whole relative path when it has a "/" before its end, else against the last element.
type pattern struct {
	base     string // the directory of its .gitignore, slash-separated, "" for the tree's root
	re       *regexp.Regexp
	negate   bool
	dirOnly  bool
	anchored bool
	// name is the pattern itself when it is a plain name (no slash, no wildcard): such a pattern can be handed
	// to find(1) as -name, so that the sandbox's listing prunes what is ignored before it is walked.
	name string
}

// parsePattern reads one line; ok is false for blank lines and comments.
func parsePattern(base, line string) (p pattern, ok bool) {
	line = strings.TrimRight(line, "\r")
	if !strings.HasSuffix(line, `\ `) {
		line = strings.TrimRight(line, " ")
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return pattern{}, false
	}
	p.base = base
	if strings.HasPrefix(line, "!") {
		p.negate, line = true, line[1:]
	} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly, line = true, strings.TrimRight(line, "/")
	}
	if line == "" {
		return pattern{}, false
	}
	if strings.Contains(line, "/") {
		p.anchored, line = true, strings.TrimPrefix(line, "/")
	}
	re, err := regexp.Compile("^" + globRegexp(line) + "$")
	if err != nil {
		return pattern{}, false // git ignores a pattern it cannot read, and so do we
	}
	p.re = re
	if !p.anchored && !strings.ContainsAny(line, `*?[\`) {
		p.name = line
	}
	return p, true
}

// globRegexp translates git's wildmatch syntax: "*" and "?" stop at "/", "**" as a whole element crosses any
// number of them, "[...]" is a class ("[!...]" negated).
func globRegexp(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/") && (i == 0 || g[i-1] == '/'):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(g[i:], "**") && i == 0 && len(g) == 2:
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(string(g[i])))
		case c == '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// matches reports whether p matches rel (relative to the tree's root), which is a directory when dir is set.
func (p pattern) matches(rel string, dir bool) bool {
	if p.dirOnly && !dir {
		return false
	}
	if p.base != "" {
		if !strings.HasPrefix(rel, p.base+"/") {
			return false
		}
		rel = rel[len(p.base)+1:]
	}
	if !p.anchored {
		rel = path.Base(rel)
	}
	return p.re.MatchString(rel)
}

// Rules decide what of a tree is left out, as git does: the patterns of every .gitignore from the root down to a
// path's directory, the later and deeper winning, then the caller's own excludes, which win over all of them. A
// directory left out is not walked, so nothing under it comes back (git's rule too).
type Rules struct {
	patterns []pattern
}

// add reads the patterns of a .gitignore in directory base.
func (r *Rules) add(base string, src io.Reader) error {
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		if p, ok := parsePattern(base, sc.Text()); ok {
			r.patterns = append(r.patterns, p)
		}
	}
	return sc.Err()
}

// with returns r with the patterns of a .gitignore in directory base after its own; r is not changed, so that a
// directory's rules apply only below it.
func (r Rules) with(base string, src io.Reader) (Rules, error) {
	out := Rules{patterns: append([]pattern(nil), r.patterns...)}
	err := out.add(base, src)
	return out, err
}

// Ignored reports whether rel (slash-separated, relative to the root) is left out.
func (r Rules) Ignored(rel string, dir bool) bool {
	ignored := false
	for _, p := range r.patterns {
		if p.matches(rel, dir) {
			ignored = !p.negate
		}
	}
	return ignored
}

// prunedNames are the plain names that leave a directory out wherever it is, for find(1)'s -prune: a fast path,
// since everything the sandbox lists is judged by Ignored again.
func (r Rules) prunedNames() []string {
	var out []string
	for _, p := range r.patterns {
		if p.negate {
			return nil // a later "!" could bring back something under a pruned name; list it all
		}
		if p.name != "" && p.base == "" {
			out = append(out, p.name)
		}
	}
	return out
}

// secretNames are files that hold credentials more often than not: left out of a sync unless asked for.
var secretNames = []string{
	".env", ".env.*", "!.env.example", "!.env.sample", "!.env.template", "*.pem", "*.key", "*.p12", "*.pfx",
	"*.keystore", "*.jks", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".netrc", ".npmrc", ".pypirc",
	".git-credentials", "credentials.json", "*.tfvars", ".pgpass",
}

// secretRules are secretNames as patterns.
func secretRules() Rules {
	var r Rules
	_ = r.add("", strings.NewReader(strings.Join(secretNames, "\n")))
	return r
}

// IsSecret reports whether a file's name looks like one that holds credentials.
func IsSecret(rel string) bool {
	return secretRules().Ignored(rel, false)
}
