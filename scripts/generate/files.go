package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Where the generated files are, from the module's root.
const (
	snapshotDir    = "tools/testdata/tools"
	readmePath     = "README.md"
	policyDocPath  = "docs/policy.md"
	manifestPath   = "packaging/bundle/manifest.json"
	policyTestPath = "policy/tools_gen_test.go"
)

// file is one generated file: whole, or, for a hand-written file with generated parts, update, which makes the
// file's new text from its old.
type file struct {
	path   string
	whole  []byte
	update func(old []byte) ([]byte, error)
}

// generated is every file that follows from the tool definitions.
func generated(root string) ([]file, error) {
	all := tools.All(tools.Deps{})
	var files []file
	for _, t := range all {
		snap, err := snapshot(t.Tool)
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: snapshotPath(t.Tool.Name), whole: snap})
	}
	catalogue, err := policyCatalogue(all)
	if err != nil {
		return nil, err
	}
	files = append(files,
		file{path: readmePath, update: func(old []byte) ([]byte, error) {
			return section(old, "tools", tools.MarkdownTable(all))
		}},
		file{path: policyDocPath, update: func(old []byte) ([]byte, error) {
			doc, err := section(old, "policy", fmt.Sprintf("```yaml\n%s```\n", policy.DefaultYAML))
			if err != nil {
				return nil, err
			}
			return conditionTools(doc, all)
		}},
		file{path: manifestPath, update: func(old []byte) ([]byte, error) {
			return manifestTools(old, all)
		}},
		file{path: policyTestPath, whole: catalogue},
	)
	return files, nil
}

func snapshotPath(name string) string { return filepath.Join(snapshotDir, name+".json") }

// leftovers are the files of the snapshot directory that are no tool's snapshot, e.g. a renamed tool's.
func leftovers(root string) ([]string, error) {
	want := map[string]bool{}
	for _, t := range tools.All(tools.Deps{}) {
		want[snapshotPath(t.Tool.Name)] = true
	}
	entries, err := os.ReadDir(filepath.Join(root, snapshotDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var extra []string
	for _, e := range entries {
		if path := filepath.Join(snapshotDir, e.Name()); !want[path] {
			extra = append(extra, path)
		}
	}
	return extra, nil
}

// snapshot is the tool as a client that lists it reads it: the server's JSON decoded into mcp-go's Tool (which is
// what tools/golden_test.go's clients hold) and encoded again, indented.
func snapshot(t mcp.Tool) ([]byte, error) {
	sent, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var received mcp.Tool
	if err := json.Unmarshal(sent, &received); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(received, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// section replaces the text between <!-- name:begin --> and <!-- name:end --> in doc with want.
func section(doc []byte, name, want string) ([]byte, error) {
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("lacks the markers %q and %q", strings.TrimSpace(begin), end)
	}
	out := append([]byte{}, doc[:i+len(begin)]...)
	out = append(out, want...)
	return append(out, doc[j:]...), nil
}

// conditionRow is a row of docs/policy.md's table of conditions: the condition, then its last cell, which names
// the tools it applies to.
var conditionRow = regexp.MustCompile("(?m)^(\\| `([a-z_]+)` \\|.*\\| )([^|]*)( \\|)$")

// conditionTools rewrites the last cell of each row of the table of conditions for a condition on an argument: the
// tools whose definitions give that argument to the policy, each with its parameter's name where that is not the
// condition's own.
func conditionTools(doc []byte, all []tools.Tool) ([]byte, error) {
	rows := 0
	out := conditionRow.ReplaceAllFunc(doc, func(row []byte) []byte {
		m := conditionRow.FindSubmatch(row)
		condition := string(m[2])
		kinds := policy.ConditionArgs(condition)
		if kinds == nil {
			return row
		}
		rows++
		var names []string
		for _, t := range all {
			for _, k := range kinds {
				param, ok := t.Policy.Args[k]
				if !ok {
					continue
				}
				name := "`" + t.Policy.Name + "`"
				if param != condition {
					name += " (`" + param + "`)"
				}
				names = append(names, name)
				break
			}
		}
		cell := strings.Join(names, ", ")
		if cell == "" {
			cell = "none"
		}
		return append(append(append([]byte{}, m[1]...), cell...), m[4]...)
	})
	if rows == 0 {
		return nil, fmt.Errorf("has no table of conditions (rows like | `path` | ... | tools |)")
	}
	return out, nil
}

// manifestTools replaces the "tools" of a bundle's manifest with the server's, names and descriptions in the
// server's order (Claude Desktop shows them before installing), leaving every other field as it is, in its place.
// The manifest is kept in one form: two-space indents, no HTML escaping, a final newline.
func manifestTools(old []byte, all []tools.Tool) ([]byte, error) {
	type manifestTool struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	list := make([]manifestTool, len(all))
	for i, t := range all {
		list[i] = manifestTool{t.Tool.Name, t.Tool.Description}
	}
	toolsJSON, err := encode(list)
	if err != nil {
		return nil, err
	}
	// The top-level object's members in their order, with tools replaced.
	dec := json.NewDecoder(bytes.NewReader(old))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var compact bytes.Buffer
	compact.WriteByte('{')
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		if tok == "tools" {
			value, found = toolsJSON, true
		}
		if compact.Len() > 1 {
			compact.WriteByte(',')
		}
		key, _ := json.Marshal(tok)
		compact.Write(key)
		compact.WriteByte(':')
		if err := json.Compact(&compact, value); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, fmt.Errorf("has no tools")
	}
	compact.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// encode is JSON without HTML escaping, as the manifest keeps it.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// policyCatalogue is the Go source of the catalogue the policy package's tests are written against: a constant
// for each tool's name and the list of policy.Tool that tools.PolicyTools gives.
func policyCatalogue(all []tools.Tool) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by scripts/generate from tools.All (make generate). DO NOT EDIT.\n\n")
	b.WriteString("package policy\n\n")
	b.WriteString("// The tools the policy's tests are written against: the catalogue the tools package describes,\n" +
		"// written out here because policy cannot import the package above it.\n")
	b.WriteString("const (\n")
	for _, t := range all {
		fmt.Fprintf(&b, "\t%s = %q\n", constName(t.Policy.Name), t.Policy.Name)
	}
	b.WriteString(")\n\n")
	b.WriteString("var testToolList = []Tool{\n")
	for _, t := range all {
		p := t.Policy
		fmt.Fprintf(&b, "\t{Name: %s", constName(p.Name))
		if len(p.Args) > 0 {
			b.WriteString(", Args: map[Arg]string{")
			for i, k := range slices.Sorted(maps.Keys(p.Args)) {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: %q", string(k), p.Args[k])
			}
			b.WriteString("}")
		}
		if len(p.Actions) > 0 {
			fmt.Fprintf(&b, ", Actions: %#v", p.Actions)
		}
		if p.Grants != "" {
			fmt.Fprintf(&b, ", Grants: %s", constName(p.Grants))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// constName is the Go name of a tool's constant: e2b_download_url is toolDownloadURL.
func constName(tool string) string {
	name := "tool"
	for _, w := range strings.Split(strings.TrimPrefix(tool, "e2b_"), "_") {
		switch w {
		case "":
		case "url", "id":
			name += strings.ToUpper(w)
		default:
			name += strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return name
}
