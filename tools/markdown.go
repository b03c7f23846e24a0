package tools

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/server"
)

// MarkdownTable renders the tools as the Markdown table the README embeds: name, parameters (optional ones with
// '?'), the annotation hints that are set, and the first sentence of the description.
func MarkdownTable(tools []Tool) string {
	var sb strings.Builder
	sb.WriteString("| Tool | Parameters | Annotations | Description |\n")
	sb.WriteString("|---|---|---|---|\n")
	for _, t := range tools {
		params := parameters(t.Tool.RawInputSchema)
		if len(params) == 0 {
			params = []string{"none"}
		}
		sb.WriteString("| `" + t.Tool.Name + "` | " + strings.Join(params, ", ") + " | " +
			annotations(t.ServerTool) + " | " + cell(firstSentence(t.Tool.Description)) + " |\n")
	}
	return sb.String()
}

// parameters lists a schema's properties in their order, as `name` or `name?` for optional ones.
func parameters(schema json.RawMessage) []string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tok.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return out
		}
		if slices.Contains(s.Required, name) {
			out = append(out, "`"+name+"`")
		} else {
			out = append(out, "`"+name+"?`")
		}
	}
	return out
}

func annotations(t server.ServerTool) string {
	a := t.Tool.Annotations
	var out []string
	for _, h := range []struct {
		v    *bool
		name string
	}{{a.ReadOnlyHint, "read-only"}, {a.DestructiveHint, "destructive"}, {a.IdempotentHint,
		"idempotent"}, {a.OpenWorldHint, "open-world"}} {
		if h.v != nil && *h.v {
			out = append(out, h.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// firstSentence is text up to the first '.', '!' or '?' that ends it or is followed by a space and a capital
// letter (so that "e.g. this" does not end a sentence).
func firstSentence(text string) string {
	text = strings.TrimSpace(text)
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '.', '!', '?':
			if i+1 == len(text) {
				return text
			}
			if rest := strings.TrimLeft(text[i+1:], " \n"); len(rest) < len(text[i+1:]) && rest != "" &&
				rest[0] >= 'A' && rest[0] <= 'Z' {
				return text[:i+1]
			}
		}
	}
	return text
}

// cell keeps text inside one Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
