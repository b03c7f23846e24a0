// Command generate writes every file that follows from the tool definitions (tools.All) and the built-in policy:
// one snapshot per tool of what clients list, the README's table of tools, the built-in policy and the tools each
// policy condition applies to in docs/policy.md, the tools of the Claude Desktop bundle's manifest, and the tool
// catalogue the policy package's tests are written against (policy cannot import tools, which sits above it).
//
// Run it as `make generate` (go generate ./... reaches it through the directive in tools/tools.go). With -check it
// writes nothing and exits 1 naming each stale file; its own test does the same, so a definition changed without
// regenerating fails the tests with "run make generate".
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("C", ".", "the module's root directory")
	check := flag.Bool("check", false, "write nothing; exit 1 naming each file that is not as generated")
	flag.Parse()
	stale, err := run(*root, !*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(2)
	}
	if *check && len(stale) > 0 {
		for _, s := range stale {
			fmt.Fprintf(os.Stderr, "%s is stale\n", s)
		}
		fmt.Fprintln(os.Stderr, "run make generate")
		os.Exit(1)
	}
}

// run compares every generated file under root with what the definitions make of it and returns the paths that
// differ (or must go); with write it then brings them up to date. Every file is made before any is written, so a
// document that cannot be brought up to date leaves all of them as they were.
func run(root string, write bool) (stale []string, err error) {
	files, err := generated(root)
	if err != nil {
		return nil, err
	}
	wants := map[string][]byte{}
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		want := f.whole
		if f.update != nil {
			if old == nil {
				return nil, fmt.Errorf("%s: missing; it is hand-written around its generated part", f.path)
			}
			if want, err = f.update(old); err != nil {
				return nil, fmt.Errorf("%s: %w", f.path, err)
			}
		}
		if old == nil || !bytes.Equal(old, want) {
			stale = append(stale, f.path)
			wants[f.path] = want
		}
	}
	extra, err := leftovers(root)
	if err != nil {
		return nil, err
	}
	stale = append(stale, extra...)
	if !write {
		return stale, nil
	}
	for _, path := range stale {
		full := filepath.Join(root, path)
		want, keep := wants[path]
		if !keep {
			if err := os.Remove(full); err != nil {
				return nil, err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, want, 0o644); err != nil {
			return nil, err
		}
	}
	return stale, nil
}
