package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

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
	// dflt is the schema's default for this value (nil when it declares none).
	dflt any
}

type rawSchema struct {
	Properties           map[string]json.RawMessage `json:"properties"`
	AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	Items                json.RawMessage            `json:"items"`
	Default              any                        `json:"default"`
}

// maxSchemaDepth bounds the recursion over a schema and over arguments.
const maxSchemaDepth = 16

func shapeOfTool(t mcp.Tool) *argShape {
	raw := t.RawInputSchema
	if len(raw) == 0 {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil
		}
		raw = b
	}
	return parseShape(raw, 0)
}

func parseShape(raw json.RawMessage, depth int) *argShape {
	var s rawSchema
	if depth > maxSchemaDepth || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	sh := &argShape{closed: strings.TrimSpace(string(s.AdditionalProperties)) == "false", dflt: s.Default}
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

// withDefaults returns the arguments as the tool will act on them: a copy with every top-level parameter the call
// leaves out set to the schema's default. The policy judges these, so that a rule on template "base" or on a
// timeout also covers the call that relies on the default; the input map is not changed.
func (sh *argShape) withDefaults(args map[string]any) map[string]any {
	if sh == nil {
		return args
	}
	var out map[string]any
	for name, p := range sh.props {
		if p == nil || p.dflt == nil {
			continue
		}
		if _, given := args[name]; given {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(args)+len(sh.props))
			for k, v := range args {
				out[k] = v
			}
		}
		out[name] = p.dflt
	}
	if out == nil {
		return args
	}
	return out
}

// EffectiveArgs is what the policy judges for a call of tool: args with the schema defaults of the tools as
// configured by cfg filled in, and upload_files planned from cfg's storage roots (see withUploadTargets).
// `e2b-mcp policy explain` uses it so that it decides as a running server does.
func EffectiveArgs(cfg tools.Config, tool string, args map[string]any) map[string]any {
	for _, t := range tools.All(tools.Deps{Config: cfg}) {
		if t.Tool.Name == tool {
			return effectiveArgs(shapeOfTool(t.Tool), cfg, tool, args)
		}
	}
	return args
}

func effectiveArgs(sh *argShape, cfg tools.Config, tool string, args map[string]any) map[string]any {
	return withUploadTargets(cfg, tool, sh.withDefaults(args))
}

// withUploadTargets replaces the upload_files of e2b_create_sandbox by one entry per file the uploads write, each
// with the sandbox path it lands at, so that a path rule judges every file of a directory upload and the default
// target of an entry without sandbox_path. Uploads that cannot be planned (the tool refuses them) are left as
// given: the policy then judges each entry's own target. The input map is not changed.
func withUploadTargets(cfg tools.Config, tool string, args map[string]any) map[string]any {
	uploads, _ := args["upload_files"].([]any)
	if tool != "e2b_create_sandbox" || len(uploads) == 0 || len(cfg.StorageRoots) == 0 {
		return args
	}
	targets, err := tools.UploadTargets(cfg, uploads)
	if err != nil {
		return args
	}
	files := make([]any, len(targets))
	for i, t := range targets {
		files[i] = map[string]any{"session_path": t.SessionPath, "sandbox_path": t.SandboxPath}
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = v
	}
	out["upload_files"] = files
	return out
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
	if len(known) == 0 {
		return fmt.Errorf("Unknown parameter: %s (this takes no parameters)", name)
	}
	return fmt.Errorf("Unknown parameter: %s (parameters are: %s; names are case-sensitive)", name, strings.Join(known, ", "))
}
