package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
)

// Check enforces every keyword a tool's published input schema uses: a schema that uses another (a pattern, a
// oneOf) would be published to clients but not held to, so this fails until Check learns it.
func TestSchemasUseOnlyCheckedKeywords(t *testing.T) {
	t.Parallel()
	allowed := append([]string{"description", "default"}, checkedKeywords...)
	var walk func(tool, path string, s map[string]any)
	walk = func(tool, path string, s map[string]any) {
		for k, v := range s {
			if !slices.Contains(allowed, k) {
				t.Errorf("%s: the input schema at %q uses %q, which Check does not enforce", tool, path, k)
			}
			switch k {
			case "properties":
				props, _ := v.(map[string]any)
				for name, p := range props {
					if ps, ok := p.(map[string]any); ok {
						walk(tool, path+"."+name, ps)
					}
				}
			case "items", "additionalProperties":
				if sub, ok := v.(map[string]any); ok {
					walk(tool, path+"."+k, sub)
				}
			}
		}
	}
	for _, tool := range All(Deps{}) {
		var s map[string]any
		if err := json.Unmarshal(tool.Tool.RawInputSchema, &s); err != nil {
			t.Fatalf("%s: %v", tool.Tool.Name, err)
		}
		walk(tool.Tool.Name, "", s)
	}
}

// Check accepts exactly the arguments a JSON Schema validator accepts (google/jsonschema-go, the one mcp-go
// builds on), for every tool and for arguments made from its schema: each parameter at and past its bounds, of
// every other type, empty, left out, unknown names, nested ones.
func TestCheckAgreesWithJSONSchema(t *testing.T) {
	t.Parallel()
	for _, tool := range All(Deps{}) {
		var s jsonschema.Schema
		if err := json.Unmarshal(tool.Tool.RawInputSchema, &s); err != nil {
			t.Fatalf("%s: %v", tool.Tool.Name, err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", tool.Tool.Name, err)
		}
		cases := argumentCases(tool.schema)
		refused := 0
		for _, args := range cases {
			ours, theirs := tool.Check(args), rs.Validate(args)
			if (ours == nil) != (theirs == nil) {
				raw, _ := json.Marshal(args)
				t.Errorf("%s %s: Check says %v, the validator %v", tool.Tool.Name, raw, ours, theirs)
			}
			if ours != nil {
				refused++
			}
		}
		if refused == 0 || refused == len(cases) {
			t.Errorf("%s: %d of %d cases refused; the cases do not tell accepting from refusing", tool.Tool.Name,
				refused, len(cases))
		}
	}
}

// argumentCases are argument objects made from s: a valid one, and that one changed in each way a schema keyword
// can refuse.
func argumentCases(s *argSchema) []map[string]any {
	base := validObject(s)
	with := func(name string, v any) map[string]any {
		out := copyMap(base)
		out[name] = v
		return out
	}
	cases := []map[string]any{base, with("Unknown_Name", "x")}
	for _, name := range s.Required {
		out := copyMap(base)
		delete(out, name)
		cases = append(cases, out)
	}
	for name, p := range s.Properties {
		for _, v := range valueCases(p) {
			cases = append(cases, with(name, v))
		}
	}
	return cases
}

// valueCases are values for a parameter of schema p: valid ones and ones each of its keywords refuses.
func valueCases(p *argSchema) []any {
	out := []any{validValue(p), "x", "", 1.0, 1.5, -1.0, true, nil, []any{}, map[string]any{}}
	for _, bound := range []*float64{p.Minimum, p.Maximum} {
		if bound != nil {
			out = append(out, *bound-1, *bound, *bound+1)
		}
	}
	for _, e := range p.Enum {
		out = append(out, e, fmt.Sprint(e)+"x")
	}
	if p.Items != nil {
		out = append(out, []any{validValue(p.Items)}, []any{validValue(p.Items), "x"})
		if p.Items.Type == "object" {
			for _, item := range argumentCases(p.Items) {
				out = append(out, []any{item})
			}
		}
	}
	if p.AdditionalProperties != nil && !p.AdditionalProperties.closed {
		out = append(out, map[string]any{"K": validValue(p.AdditionalProperties)}, map[string]any{"K": 1.5},
			map[string]any{"": "v"})
	}
	return out
}

func validObject(s *argSchema) map[string]any {
	out := map[string]any{}
	for _, name := range s.Required {
		out[name] = validValue(s.Properties[name])
	}
	return out
}

func validValue(p *argSchema) any {
	if len(p.Enum) > 0 {
		return p.Enum[0]
	}
	switch p.Type {
	case "integer", "number":
		if p.Minimum != nil {
			return *p.Minimum
		}
		return 1.0
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return validObject(p)
	}
	return "x"
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Arguments that are not an object are refused whole, and an in-process caller's arguments (a struct, raw JSON)
// are checked as their JSON decodes.
func TestCheckArgumentsWhole(t *testing.T) {
	t.Parallel()
	exec := toolNamed(t, execName)
	for _, c := range []struct {
		args any
		want string
	}{
		{"x", "Invalid arguments: expected a JSON object of parameters, got string"},
		{json.RawMessage(`[1]`), "Invalid arguments: expected a JSON object of parameters, got array"},
		{json.RawMessage(`{"sandbox_id":"a"}`), "Missing required parameter: command"},
		{struct{ Command string }{Command: "true"}, "Unknown parameter: Command (parameters are: background, command, " +
			"cwd, pty, sandbox_id, timeout_ms, wait_ms; names are case-sensitive)"},
	} {
		if err := exec.Check(c.args); err == nil || err.Error() != c.want {
			t.Errorf("%#v: got %v, want %q", c.args, err, c.want)
		}
	}
	if err := exec.Check(json.RawMessage(`{"sandbox_id":"a","command":"true"}`)); err != nil {
		t.Errorf("valid raw JSON refused: %v", err)
	}
	if err := toolNamed(t, listSandboxesName).Check(nil); err != nil {
		t.Errorf("no arguments for a tool that needs none: %v", err)
	}
}

func toolNamed(t *testing.T, name string) Tool {
	t.Helper()
	for _, tool := range All(Deps{}) {
		if tool.Tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s", name)
	return Tool{}
}

type bindArgs struct {
	N int  `json:"n,omitempty"`
	P *int `json:"p,omitempty"`
}

// Bind fills in each left-out parameter's default, and leaves a pointer one nil, whatever default it publishes,
// so that the tool can tell its absence; no call sees another's arguments.
func TestBindAppliesDefaults(t *testing.T) {
	t.Parallel()
	var got []bindArgs
	tool := define(newBase(Deps{}), definition[bindArgs, struct{}]{
		name:     "bind_defaults",
		defaults: bindArgs{N: 5, P: new(7)},
		run: func(_ context.Context, _ Caller, a *bindArgs) (*struct{}, error) {
			got = append(got, *a)
			a.N = -1 // a handler that changes its arguments changes no other call's
			return &struct{}{}, nil
		},
	})
	if p, _ := tool.schema.Properties["p"]; p == nil || p.Default != 7.0 {
		t.Errorf("p's published default: %+v, want 7", p)
	}
	for _, raw := range []string{`{}`, `{"p":3,"n":2}`, `null`} {
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(`{"name":"bind_defaults","arguments":`+raw+`}`), &req.Params); err != nil {
			t.Fatal(err)
		}
		if res, err := tool.Handler(WithCaller(t.Context(), Caller{Owner: "a", Session: "b"}), req); err != nil ||
			res.IsError {
			t.Fatalf("%s: %v %v", raw, err, res)
		}
	}
	if len(got) != 3 || got[0].N != 5 || got[0].P != nil || got[1].N != 2 || got[1].P == nil || *got[1].P != 3 ||
		got[2].N != 5 || got[2].P != nil {
		t.Errorf("bound %+v; want {5 nil}, {2 3}, {5 nil}", got)
	}
}
