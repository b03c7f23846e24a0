package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// hints are a tool's four MCP annotation hints; every tool states all four, since mcp-go's defaults (destructive,
// not read-only) would misdescribe most of them.
type hints struct {
	readOnly, destructive, idempotent, openWorld bool
}

// newTool describes a tool: input and output schemas reflected from its argument and result structs. tweak, when
// given, edits the input schema before it is encoded (defaults that come from the configuration).
func newTool(name, description string, args, result any, h hints, tweak ...func(*jsonschema.Schema)) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, description, schemaOf(args, tweak...))
	t.RawOutputSchema = schemaOf(result)
	t.Annotations = mcp.ToolAnnotation{
		ReadOnlyHint:    mcp.ToBoolPtr(h.readOnly),
		DestructiveHint: mcp.ToBoolPtr(h.destructive),
		IdempotentHint:  mcp.ToBoolPtr(h.idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(h.openWorld),
	}
	return t
}

// schemaOf reflects v's type into a self-contained JSON Schema object (no $defs, no $id, no $schema: MCP's
// default dialect applies) that always has "properties", which some clients insist on.
func schemaOf(v any, tweak ...func(*jsonschema.Schema)) json.RawMessage {
	r := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.Reflect(v)
	s.Version = ""
	if s.Properties == nil {
		s.Properties = jsonschema.NewProperties()
	}
	for _, f := range tweak {
		f(s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		// Reflected schemas hold only strings, numbers and maps; this cannot happen, and an open object schema
		// is a truthful if weaker fallback.
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return b
}

// setDefault records a parameter's default value in a schema; unknown names are ignored.
func setDefault(name string, value any) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		if p, ok := s.Properties.Get(name); ok && p != nil {
			p.Default = value
		}
	}
}

// toolError is a mistake or a refusal the model can read and correct: its text is the whole tool result.
type toolError struct{ text string }

func (e *toolError) Error() string { return e.text }

func userErrorf(format string, args ...any) error {
	return &toolError{text: fmt.Sprintf(format, args...)}
}

func missing(name string) error {
	return &toolError{text: "Missing required parameter: " + name}
}

// ConnectionRequired is the answer of every tool when the owner has no E2B key (the server names its connect
// page instead where it has one).
func ConnectionRequired(owner string) string {
	return "No E2B API key is connected for " + owner + ". Run `e2b-mcp auth login` in a terminal " +
		"(or use --backend local to try the server without an account), then call this tool again."
}

type progressTokenKey struct{}

// handlerFunc is a tool's handler once the caller and arguments are known. It returns the result struct, or an
// error that errorText turns into the text of an isError result.
type handlerFunc[A any] func(ctx context.Context, call Caller, args *A) (any, error)

// adapt turns h into an mcp-go handler: it reads the caller, binds the arguments, and answers every failure as
// a tool result with isError, never as a Go error or a panic.
func adapt[A any](b *base, name string, h handlerFunc[A]) server.ToolHandlerFunc {
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
		var args A
		if m, ok := decodedArgs(ctx); !ok || !bindDecoded(m, &args) {
			args = *new(A)
			if err := bindArgs(req, &args); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
		}
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			ctx = context.WithValue(ctx, progressTokenKey{}, req.Params.Meta.ProgressToken)
		}
		out, err := h(ctx, call, &args)
		if err != nil {
			return b.failure(b.errorText(ctx, call, name, err)), nil
		}
		return b.success(name, out), nil
	}
}

// bindArgs decodes the call's arguments into args, naming the parameter whose value has the wrong type.
func bindArgs(req mcp.CallToolRequest, args any) error {
	raw, err := rawArguments(req)
	if err != nil {
		return userErrorf("Invalid arguments: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, args); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return userErrorf("Invalid arguments: expected a JSON object of parameters, got %s", te.Value)
			}
			return userErrorf("Invalid parameter %s: expected %s, got %s", te.Field, jsonTypeName(te.Type.String()), te.Value)
		}
		return userErrorf("Invalid arguments: %v", err)
	}
	return nil
}

func rawArguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments, nil
	}
	switch a := req.Params.Arguments.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return a, nil
	default:
		return json.Marshal(a)
	}
}

// jsonTypeName words a Go type of an argument field the way the schema does.
func jsonTypeName(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return "an object"
}

// withContent is a handler's result with content beside its JSON: an image the model can see, links to the
// files the result names.
type withContent struct {
	result any
	extra  []mcp.Content
}
