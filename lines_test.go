package main

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxLine is how long a line of production Go may be, in characters (a tab counting as one): the code reads in a
// side-by-side diff and a review tool without wrapping.
const maxLine = 120

// Every line of the module's production Go (not its tests, not tests/) is at most maxLine characters long, but
// where the character past the limit lies inside a raw string literal: a struct tag or the text of a raw string
// (a usage message, a page's HTML, a shell script) cannot be wrapped without changing what it says.
func TestLineLength(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "bin", "dist", "tests":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range longLines(path, src, maxLine) {
			t.Error(l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// longLines lists the lines of src, a Go file, longer than limit characters whose character past the limit is not
// inside a raw string literal.
func longLines(path string, src []byte, limit int) []string {
	fset := token.NewFileSet()
	file := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	type span struct{ from, to int }
	var raw []span
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.STRING && strings.HasPrefix(lit, "`") {
			from := file.Offset(pos)
			raw = append(raw, span{from, from + len(lit)})
		}
	}
	var out []string
	offset := 0
	for n, line := range strings.SplitAfter(string(src), "\n") {
		text := strings.TrimSuffix(line, "\n")
		if length := utf8.RuneCountInString(text); length > limit {
			past := offset
			for i := range text {
				if utf8.RuneCountInString(text[:i]) == limit {
					past = offset + i
					break
				}
			}
			inRaw := false
			for _, r := range raw {
				if r.from <= past && past < r.to {
					inRaw = true
					break
				}
			}
			if !inRaw {
				out = append(out, fmt.Sprintf("%s:%d: %d characters, more than %d", path, n+1, length, limit))
			}
		}
		offset += len(line)
	}
	return out
}

// The check itself: a long line of code or comment is found, one whose excess is a struct tag or the text of a raw
// string is not, and characters count as characters, not bytes.
func TestLongLinesFindsThem(t *testing.T) {
	long := strings.Repeat("x", 30)
	src := "package p\n\n" +
		"// " + long + " " + long + "\n" +
		"var a = \"ok\"\n" +
		"type T struct {\n\tF int `json:\"f\" description:\"" + long + "\"`\n}\n" +
		"const usage = `" + long + long + "\n" + long + long + "`\n" +
		"var é = \"" + strings.Repeat("é", 28) + "\"\n" +
		"var b = \"" + long + "\" + \"" + long + "\"\n"
	got := longLines("p.go", []byte(src), 40)
	want := []string{"p.go:3: 64 characters, more than 40", "p.go:11: 75 characters, more than 40"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("longLines found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
