package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The project's documents: the README, the files beside it, and docs/.
func projectDocs(t *testing.T) []string {
	t.Helper()
	docs := []string{"../README.md", "../CONTRIBUTING.md", "../SECURITY.md", "../packaging/README.md"}
	more, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, more...)
}

var (
	fence        = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
	inlineCode   = regexp.MustCompile("`[^`\n]*`")
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading      = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
)

// anchors are the fragment names GitHub gives a document's headings: lower case, punctuation dropped, spaces made
// hyphens, and a repeated one numbered (-1, -2, ...).
func anchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(doc, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// brokenLinks lists the relative links of the document at path (read as text) that name no file of the checkout, or a
// heading its target does not have.
func brokenLinks(path, text string) []string {
	var broken []string
	prose := inlineCode.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
	for _, m := range markdownLink.FindAllStringSubmatch(prose, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, fragment, _ := strings.Cut(target, "#")
		dest, destText := path, text
		if file != "" {
			dest = filepath.Join(filepath.Dir(path), file)
			data, err := os.ReadFile(dest)
			if err != nil {
				if info, statErr := os.Stat(dest); statErr == nil && info.IsDir() && fragment == "" {
					continue
				}
				broken = append(broken, fmt.Sprintf("%s: %s: no such file", path, target))
				continue
			}
			destText = string(data)
		}
		if fragment != "" && !anchors(destText)[fragment] {
			broken = append(broken, fmt.Sprintf("%s: %s: %s has no heading #%s", path, target, dest, fragment))
		}
	}
	return broken
}

// Every relative link in the documentation leads to a file of the checkout, and to a heading that file has.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	for _, path := range projectDocs(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokenLinks(path, string(data)) {
			t.Error(b)
		}
	}
}

// The link check itself: it finds a missing file, a missing heading and a heading of another file, and passes links
// that are right, outside code.
func TestBrokenLinksFindsThem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := filepath.Join(dir, "other.md")
	if err := os.WriteFile(other, []byte("# Other\n\n## What `path` rules stop\n\n## Twice\n\n## Twice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "doc.md")
	text := "# Doc\n\n## Here and there\n\n" +
		"[ok](other.md) [ok](other.md#what-path-rules-stop) [ok](#here-and-there) [ok](other.md#twice-1)\n" +
		"[ok](https://example.com/x#y) `[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n" +
		"[bad](missing.md) [bad](other.md#nowhere) [bad](#there) [bad](other.md#twice-2)\n"
	got := brokenLinks(doc, text)
	want := []string{"missing.md", "other.md#nowhere", "#there", "other.md#twice-2"}
	if len(got) != len(want) {
		t.Fatalf("brokenLinks found %d broken links, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], ": "+w+": ") {
			t.Errorf("broken link %d is %q, want one naming %s", i+1, got[i], w)
		}
	}
}
