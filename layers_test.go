package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/e2b-mcp/e2b-mcp"

// layers are the module's packages from the top down (docs/ARCHITECTURE.md, "Layers"): a package may import its
// own room (e2b and e2b/emulator import e2b/wire and e2b/wire/envd) and the layers below its own, never a layer above or beside it. A
// room is a tree of packages, named by its path; a package is in the room of the longest of these names its path
// starts with (server/preview is a room of its own below server, e2b/emulator is in e2b's). The end-to-end tests,
// the examples and the scripts sit at the top beside main, since nothing imports them.
var layers = [][]string{
	{"", "tests", "examples", "scripts"},
	{"cli"},
	{"server"},
	// The server's rooms, one job each, which the server wires together. httpauth tells OAuth's refusals apart,
	// the pages' tests sign in with oauth, and the MCP transports (mcphttp) keep browsers from reading SSE.
	{"server/pages", "server/httpauth", "server/mcphttp", "server/synclink"},
	{"server/preview", "server/oauth", "server/browsers", "server/tickets", "server/tasks"},
	{"tools"},
	{"egress"},
	{"lifecycle", "credentials"},
	{"state", "e2b", "policy", "audit", "imagesafe", "workspace"},
	{"internal"},
}

// apart are what a package tree must not depend on, even through other packages.
var apart = map[string][]string{
	"e2b":    {"github.com/mark3labs/mcp-go"}, // the E2B client knows nothing of MCP
	"state":  {"net/http"},                    // records and policies know nothing of HTTP
	"policy": {"net/http"},
}

func TestLayers(t *testing.T) {
	layerOf := map[string]int{}
	for i, trees := range layers {
		for _, tree := range trees {
			layerOf[tree] = i
		}
	}
	// A package's own tests keep to its layer too. An external test package (package x_test), which nothing
	// imports, may reach above, to check x against what uses it.
	out := goList(t, `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}}`)
	for _, line := range out {
		fields := strings.Fields(line)
		pkg := fields[0]
		room := roomOf(pkg, layerOf)
		layer, known := layerOf[room]
		if !known {
			t.Errorf("package %s is in no layer: add %q to layers here and to docs/ARCHITECTURE.md", pkg, room)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) || imp == pkg {
				continue
			}
			to := roomOf(imp, layerOf)
			if to == room {
				continue
			}
			if l, ok := layerOf[to]; ok && l <= layer {
				t.Errorf("%s imports %s: %q is not below %q", pkg, imp, to, room)
			}
		}
	}

	// What only tests need (e2btest, pgtest) stays out of the binary: no package but another test helper imports
	// one outside its tests.
	for _, line := range goList(t, `{{.ImportPath}} {{join .Imports " "}}`) {
		fields := strings.Fields(line)
		if isTestHelper(fields[0]) {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) && isTestHelper(imp) {
				t.Errorf("%s imports the test helper %s", fields[0], imp)
			}
		}
	}

	for _, line := range goList(t, `{{.ImportPath}} {{join .Deps " "}}`) {
		fields := strings.Fields(line)
		for _, forbidden := range apart[treeOf(fields[0])] {
			for _, dep := range fields[1:] {
				if dep == forbidden || strings.HasPrefix(dep, forbidden+"/") {
					t.Errorf("%s depends on %s", fields[0], dep)
					break
				}
			}
		}
	}
}

// isTestHelper reports whether pkg is there for tests only: the end-to-end tests, a package named *test, or
// internal/waitfor (how every test waits).
func isTestHelper(pkg string) bool {
	return treeOf(pkg) == "tests" || strings.HasSuffix(pkg, "test") || pkg == module+"/internal/waitfor"
}

// treeOf is the first element of pkg's path inside the module ("" for the module's root).
func treeOf(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	tree, _, _ := strings.Cut(rel, "/")
	return tree
}

// roomOf is the room of pkg: the longest of rooms' names that is its path inside the module or a parent of it, or
// else the first element of its path.
func roomOf(pkg string, rooms map[string]int) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	for dir := rel; dir != "" && dir != "."; dir = path.Dir(dir) {
		if _, ok := rooms[dir]; ok {
			return dir
		}
	}
	return treeOf(pkg)
}

// goList is one line per package of the module, as format makes it.
func goList(t *testing.T, format string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", format, "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
