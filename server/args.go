package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// argShape is the part of a tool's input schema that decides which argument names exist: the properties of
// each object, whether others are allowed, and the shape of array items.
//
// The policy reads arguments by their exact names, while Go's JSON decoding (which the tools use) matches field
// names case-insensitively: {"Command": "..."} would reach e2b_exec's command unseen by a rule on "command".
// Refusing every name the schema does not declare closes that gap, and tells the model its mistake.
type argShape struct {
	props  map[string]*argShape
	closed bool // additionalProperties: false
	items  *argShape
	// tool is the tool whose arguments these are, at the top level of its schema (nil below).
	tool *tools.Tool
}

type rawSchema struct {
	Properties           map[string]json.RawMessage `json:"properties"`
	AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	Items                json.RawMessage            `json:"items"`
}

// maxSchemaDepth bounds the recursion over a schema and over arguments.
const maxSchemaDepth = 16

func shapeOfTool(t tools.Tool) *argShape {
	raw := t.Tool.RawInputSchema
	if len(raw) == 0 {
		b, err := json.Marshal(t.Tool.InputSchema)
		if err != nil {
			return nil
		}
		raw = b
	}
	sh := parseShape(raw, 0)
	if sh != nil {
		sh.tool = &t
	}
	return sh
}

func parseShape(raw json.RawMessage, depth int) *argShape {
	var s rawSchema
	if depth > maxSchemaDepth || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	sh := &argShape{closed: strings.TrimSpace(string(s.AdditionalProperties)) == "false"}
	if len(s.Properties) > 0 {
		sh.props = make(map[string]*argShape, len(s.Properties))
		for name, p := range s.Properties {
			sh.props[name] = parseShape(p, depth+1)
		}
	}
	if len(s.Items) > 0 {
		sh.items = parseShape(s.Items, depth+1)
	}
	return sh
}

// judged is what the policy judges of a call's arguments (tools.Tool.Judged: defaults filled in, uploads as the
// files they write); the arguments as given for a tool the server does not know.
func (sh *argShape) judged(args map[string]any) map[string]any {
	if sh == nil || sh.tool == nil {
		return args
	}
	return sh.tool.Judged(args)
}

// shown is how a human approving a call sees its arguments (tools.Tool.Shown).
func (sh *argShape) shown(args map[string]any) map[string]any {
	if sh == nil || sh.tool == nil {
		return args
	}
	return sh.tool.Shown(args)
}

// EffectiveArgs is what the policy judges for a call of tool, with the tools configured by cfg (defaults, storage
// roots): `e2b-mcp policy explain` uses it so that it decides as a running server does.
func EffectiveArgs(cfg tools.Config, tool string, args map[string]any) map[string]any {
	for _, t := range tools.All(tools.Deps{Config: cfg}) {
		if t.Tool.Name == tool {
			return t.Judged(args)
		}
	}
	return args
}

// check returns the first argument name the schema does not declare, with its path.
func (sh *argShape) check(v any, path string, depth int) error {
	if sh == nil || depth > maxSchemaDepth {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names) // the same error for the same call, whatever the map order
		for _, k := range names {
			p, known := sh.props[k]
			if !known {
				if sh.closed {
					return unknownParam(path+k, sh)
				}
				continue
			}
			if err := p.check(v[k], path+k+".", depth+1); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := sh.items.check(e, fmt.Sprintf("%s%d].", strings.TrimSuffix(path, ".")+"[", i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownParam(name string, sh *argShape) error {
	known := make([]string, 0, len(sh.props))
	for k := range sh.props {
		known = append(known, k)
	}
	slices.Sort(known)
	// The model reads these as the whole answer of the call, worded as the other argument errors are
	// ("Missing required parameter: ...").
	if len(known) == 0 {
		//lint:ignore ST1005 a tool result's sentence, not an error wrapped into another message
		return fmt.Errorf("Unknown parameter: %s (this takes no parameters)", name)
	}
	//lint:ignore ST1005 a tool result's sentence, not an error wrapped into another message
	return fmt.Errorf("Unknown parameter: %s (parameters are: %s; names are case-sensitive)", name,
		strings.Join(known, ", "))
}
