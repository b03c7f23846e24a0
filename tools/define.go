package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/policy"
)

// hints are a tool's four MCP annotation hints; every tool states all four, since mcp-go's defaults (destructive,
// not read-only) would misdescribe most of them.
type hints struct {
	readOnly, destructive, idempotent, openWorld bool
}

// definition is a tool, defined once. Everything else about it follows from this: the input and output schemas
// reflected from A (its arguments) and R (its result), the defaults, what the policy knows of its arguments, and
// the files make generate writes from it (its snapshot, the README's row, the bundle manifest's entry); adding a
// tool is its file and one line in All, then make generate.
type definition[A, R any] struct {
	name, description string
	hints             hints
	// defaults are the values the tool takes for the arguments a call leaves out: each field that is not zero is
	// its parameter's default in the schema, and what the policy judges a call without it by.
	defaults A
	// grants names the tool whose call a call of this one stands for (see policy.Tool.Grants).
	grants string
	// shown, when set, rewrites the arguments for the policy and for a human approving the call (see Tool.Shown).
	shown func(args map[string]any) map[string]any
	// actions, when set, are the values shown gives the "action" argument, which is not a parameter: the policy's
	// action condition reads it (e2b_sync_out is a patch or an apply).
	actions []string
	// tasks says how a call may become a task when its client declared MCP tasks (see tasks.go).
	tasks TaskKind
	// images says its results may carry image content (see Tool.Images).
	images bool
	// readsEgress says every call reads its owner's egress configuration (see Tool.ReadsEgress).
	readsEgress bool
	run         handlerFunc[A, R]
}

// Tool is one tool of e2b-mcp: what clients list and call, and what the server and the policy know of its
// arguments.
type Tool struct {
	server.ServerTool
	// Policy is the tool as policies see it: which of its arguments their conditions read.
	Policy policy.Tool
	// defaults are definition.defaults as JSON decoding gives them (numbers float64), by parameter name.
	defaults map[string]any
	// schema is the published input schema as Check holds calls to it.
	schema *argSchema
	shown  func(map[string]any) map[string]any
	// Tasks says how a call of the tool may be answered with a task.
	Tasks TaskKind
	// Images says its results may carry image content. A client that hands its model only structuredContent
	// (Codex, Copilot CLI) gets such a tool without its outputSchema and such a result without structuredContent,
	// so that the image is not dropped with the content (MCP: a tool that declares an outputSchema answers with
	// structuredContent).
	Images bool
	// ReadsEgress says every call of the tool reads its owner's egress configuration (it makes new sandboxes),
	// which the server then reads early (see EarlyRead).
	ReadsEgress bool
}

// Shown returns the arguments as the policy and a human approving the call must see them: for uploads, every file
// they write. args is not changed.
func (t Tool) Shown(args map[string]any) map[string]any {
	if t.shown == nil {
		return args
	}
	return t.shown(args)
}

// Judged returns the arguments as the tool will act on them, which is what the policy judges: Shown of a copy with
// each parameter the call leaves out set to its default, so that a rule on the default template or timeout also
// covers the call that relies on it. args is not changed.
func (t Tool) Judged(args map[string]any) map[string]any {
	out, copied := args, false
	for name, v := range t.defaults {
		if _, given := args[name]; given {
			continue
		}
		if !copied {
			out, copied = make(map[string]any, len(args)+len(t.defaults)), true
			for k, e := range args {
				out[k] = e
			}
		}
		out[name] = v
	}
	return t.Shown(out)
}

// EffectiveArgs is what the policy judges for a call of tool, with the tools configured by cfg (defaults, storage
// roots): `e2b-mcp policy explain` uses it so that it decides as a running server does.
func EffectiveArgs(cfg Config, tool string, args map[string]any) map[string]any {
	for _, t := range All(Deps{Config: cfg}) {
		if t.Tool.Name == tool {
			return t.Judged(args)
		}
	}
	return args
}

// define makes d a Tool served by b.
func define[A, R any](b *base, d definition[A, R]) Tool {
	r := reflectTool[A, R](d.defaults)
	t := mcp.NewToolWithRawSchema(d.name, d.description, r.inRaw)
	t.RawOutputSchema = r.outRaw
	t.Annotations = mcp.ToolAnnotation{
		ReadOnlyHint:    mcp.ToBoolPtr(d.hints.readOnly),
		DestructiveHint: mcp.ToBoolPtr(d.hints.destructive),
		IdempotentHint:  mcp.ToBoolPtr(d.hints.idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(d.hints.openWorld),
	}
	pt := policyTool[A](d.name, d.grants, r.in)
	if d.actions != nil {
		if pt.Args == nil {
			pt.Args = map[policy.Arg]string{}
		}
		pt.Args[policy.ArgAction], pt.Actions = "action", d.actions
	}
	if d.tasks != NoTasks {
		t.Meta = mcp.NewMetaFromMap(map[string]any{TasksExtension: map[string]any{"taskSupport": "optional"}})
	}
	return Tool{
		ServerTool:  server.ServerTool{Tool: t, Handler: adapt(b, d.name, newBinder(d.defaults), d.run)},
		Policy:      pt,
		defaults:    r.defaults,
		schema:      r.schema,
		shown:       d.shown,
		Tasks:       d.tasks,
		Images:      d.images,
		ReadsEgress: d.readsEgress,
	}
}

// reflection is what define reflects of a tool's argument type A, with its defaults, and result type R. It is
// the bulk of building the tools, which a server does more than once (for the policy's catalogue, for what it
// serves, and, over stdio, for the tool list it answers while it is built), so each is made once per process
// (reflections) and shared: none of it is changed after it is made.
type reflection struct {
	in            *jsonschema.Schema
	inRaw, outRaw json.RawMessage
	schema        *argSchema
	defaults      map[string]any // asDecoded
}

type reflectionKey struct {
	args, result reflect.Type
	defaults     string // the defaults' JSON
}

var reflections sync.Map // reflectionKey → *reflection

func reflectTool[A, R any](defaultArgs A) *reflection {
	defaults := nonZeroFields(defaultArgs)
	rawDefaults, err := json.Marshal(defaults) // sorted by name
	key := reflectionKey{reflect.TypeFor[A](), reflect.TypeFor[R](), string(rawDefaults)}
	if r, ok := reflections.Load(key); ok && err == nil {
		return r.(*reflection)
	}
	var args A
	var result R
	in := reflectSchema(args)
	for name, v := range defaults {
		if p, ok := in.Properties.Get(name); ok && p != nil {
			p.Default = v
		}
	}
	r := &reflection{in: in, inRaw: encodeSchema(in), outRaw: encodeSchema(reflectSchema(result)),
		defaults: asDecoded(defaults)}
	r.schema = parseArgSchema(r.inRaw)
	if err == nil {
		reflections.Store(key, r)
	}
	return r
}

// reflectSchema reflects v's type into a self-contained JSON Schema object (no $defs, no $id, no $schema: MCP's
// default dialect applies) that always has "properties", which some clients insist on.
func reflectSchema(v any) *jsonschema.Schema {
	r := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.Reflect(v)
	s.Version = ""
	if s.Properties == nil {
		s.Properties = jsonschema.NewProperties()
	}
	return s
}

func encodeSchema(s *jsonschema.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		// Reflected schemas hold only strings, numbers and maps; this cannot happen, and an open object schema
		// is a truthful if weaker fallback.
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return b
}

// jsonName is the parameter name of an argument field, "" for a field that is not one.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// nonZeroFields maps the parameter name of each field of the struct v that is not zero to its value.
func nonZeroFields(v any) map[string]any {
	rv := reflect.ValueOf(v)
	out := map[string]any{}
	for i := range rv.NumField() {
		if name := jsonName(rv.Type().Field(i)); name != "" && !rv.Field(i).IsZero() {
			out[name] = rv.Field(i).Interface()
		}
	}
	return out
}

// asDecoded is m as JSON decoding gives it back (numbers float64), the form the policy and the audit see
// arguments in.
func asDecoded(m map[string]any) map[string]any {
	raw, err := json.Marshal(m)
	var out map[string]any
	if err != nil || json.Unmarshal(raw, &out) != nil {
		// Defaults are strings and numbers; this cannot happen.
		return nil
	}
	return out
}

// policyTool reads what the policy needs of a tool from A's fields tagged `policy:"KIND"` (a policy.Arg): which
// argument holds each kind, and for the action the values its schema allows.
func policyTool[A any](name, grants string, in *jsonschema.Schema) policy.Tool {
	pt := policy.Tool{Name: name, Grants: grants}
	ty := reflect.TypeFor[A]()
	for i := range ty.NumField() {
		f := ty.Field(i)
		kind, ok := f.Tag.Lookup("policy")
		if !ok {
			continue
		}
		if pt.Args == nil {
			pt.Args = map[policy.Arg]string{}
		}
		param := jsonName(f)
		pt.Args[policy.Arg(kind)] = param
		if policy.Arg(kind) == policy.ArgAction {
			if p, ok := in.Properties.Get(param); ok && p != nil {
				for _, e := range p.Enum {
					if s, ok := e.(string); ok {
						pt.Actions = append(pt.Actions, s)
					}
				}
			}
		}
	}
	return pt
}

type progressTokenKey struct{}

// handlerFunc is a tool's handler once the caller and arguments are known. It returns the result, of the type its
// output schema is reflected from, or an error that errorText turns into the text of an isError result.
type handlerFunc[A, R any] func(ctx context.Context, call Caller, args *A) (*R, error)

// adapt turns h into an mcp-go handler: it reads the caller, binds the arguments (which the pipeline has held to
// the schema with Tool.Check), and answers every failure as a tool result with isError, never as a Go error or a
// panic.
func adapt[A, R any](b *base, name string, args binder[A], h handlerFunc[A, R]) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				b.log.Error("tool handler panicked", "tool", name, "panic", r, "stack", string(debug.Stack()))
				res, err = mcp.NewToolResultError(fmt.Sprintf("Internal error in %s: %v", name, r)), nil
			}
		}()
		call, ok := CallerFrom(ctx)
		if !ok {
			return mcp.NewToolResultError("Internal error: the server did not say who is calling (no owner or session)."), nil
		}
		bound, err := args.bind(req)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			ctx = context.WithValue(ctx, progressTokenKey{}, req.Params.Meta.ProgressToken)
		}
		out, err := h(ctx, call, &bound)
		if err == nil && out == nil {
			err = errors.New("the handler returned no result")
		}
		if err != nil {
			return b.failure(ctx, b.errorText(ctx, call, name, err)), nil
		}
		return b.success(ctx, name, out), nil
	}
}

// attachments is content a result carries beside its JSON: an image the model can see, links to the files the
// result names. A result type that may carry some embeds it; it adds nothing to the JSON or the schema.
type attachments struct{ extra []mcp.Content }

// attach adds content to the result.
func (a *attachments) attach(c ...mcp.Content) { a.extra = append(a.extra, c...) }

func (a attachments) attached() []mcp.Content { return a.extra }

// attached is a result that carries content beside its JSON.
type attached interface{ attached() []mcp.Content }
