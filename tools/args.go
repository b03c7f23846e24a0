package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// A tool's arguments have one owner, its definition: the input schema reflected from the argument struct is what
// clients are shown, what Check holds every call to, and (with the definition's defaults) what Bind fills in. The
// pipeline calls Check before the policy sees the call, so that a refusal is audited like any other and no
// handler meets an argument its schema refuses; the handler gets Bind's struct and checks only what the schema
// cannot say (one argument that needs another, limits of the server's configuration).

// argSchema is the part of JSON Schema a tool's published input schema uses, as clients read it. Check enforces
// every keyword in it; TestSchemasUseOnlyCheckedKeywords fails for a schema that uses another.
type argSchema struct {
	Type                 string                `json:"type"`
	Properties           map[string]*argSchema `json:"properties"`
	Required             []string              `json:"required"`
	AdditionalProperties *argSchema            `json:"additionalProperties"`
	Items                *argSchema            `json:"items"`
	Enum                 []any                 `json:"enum"`
	Minimum              *float64              `json:"minimum"`
	Maximum              *float64              `json:"maximum"`
	MinLength            *int                  `json:"minLength"`
	MaxLength            *int                  `json:"maxLength"`
	Default              any                   `json:"default"`
	// closed is additionalProperties: false, no name beyond Properties allowed.
	closed bool
}

// checkedKeywords are the keywords argSchema reads, besides those that only describe (description, default).
var checkedKeywords = []string{"type", "properties", "required", "additionalProperties", "items", "enum", "minimum",
	"maximum", "minLength", "maxLength"}

func (s *argSchema) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); bytes.Equal(t, []byte("false")) {
		*s = argSchema{closed: true}
		return nil
	} else if bytes.Equal(t, []byte("true")) {
		*s = argSchema{}
		return nil
	}
	type plain argSchema
	return json.Unmarshal(b, (*plain)(s))
}

// parseArgSchema reads a published input schema. A schema it cannot read checks nothing: define's schemas are
// reflected from Go types, so this does not happen, and TestAll would show it.
func parseArgSchema(raw json.RawMessage) *argSchema {
	var s argSchema
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return &s
}

// maxArgDepth bounds the recursion over arguments nested deeper than any schema of ours goes.
const maxArgDepth = 16

// Check holds a call's arguments (decoded JSON: a map[string]any, nil for none, or anything that encodes to
// JSON, as an in-process caller may give) to the tool's input schema. Its error is the whole answer to the model:
// it names the argument (by path, for nested ones) and what is wrong with it.
func (t Tool) Check(args any) error {
	if t.schema == nil {
		return nil
	}
	switch args.(type) {
	case nil, map[string]any:
	default:
		// An in-process caller's arguments, as JSON or a struct: checked as their JSON decodes.
		raw, err := json.Marshal(args)
		if err != nil {
			return &toolError{text: fmt.Sprintf("Invalid arguments: %v", err)}
		}
		args = nil
		if err := json.Unmarshal(raw, &args); err != nil {
			return &toolError{text: fmt.Sprintf("Invalid arguments: %v", err)}
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	if _, ok := args.(map[string]any); !ok {
		return &toolError{text: "Invalid arguments: expected a JSON object of parameters, got " + jsonKind(args)}
	}
	return t.schema.check(args, "", 0)
}

// check holds v to s; path is the name of v for a message ("" at the top, where v is the arguments object).
func (s *argSchema) check(v any, path string, depth int) error {
	if s == nil || depth > maxArgDepth {
		return nil
	}
	if s.closed {
		return nil // reached only through additionalProperties, which check handles
	}
	if err := s.checkType(v, path); err != nil {
		return err
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		return &toolError{text: fmt.Sprintf("Invalid %s %s: it must be %s.", path, echoValue(v), orList(s.Enum))}
	}
	switch v := v.(type) {
	case float64:
		return s.checkNumber(v, path)
	case string:
		return s.checkString(v, path)
	case []any:
		for i, e := range v {
			if err := s.Items.check(e, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		return s.checkObject(v, path, depth)
	}
	return nil
}

// checkObject holds an object to its properties: names the schema does not have first (the policy reads
// arguments by their exact names, while encoding/json would match {"Command": ...} to command unseen by a rule
// on "command"), then the required ones, then each value, in name order so that a call gets the same answer
// every time.
func (s *argSchema) checkObject(v map[string]any, path string, depth int) error {
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	slices.Sort(names)
	closed := s.AdditionalProperties != nil && s.AdditionalProperties.closed
	for _, k := range names {
		if _, known := s.Properties[k]; !known && closed {
			return s.unknown(join(path, k))
		}
	}
	for _, k := range s.Required {
		if _, given := v[k]; !given {
			return &toolError{text: "Missing required parameter: " + join(path, k)}
		}
	}
	for _, k := range names {
		p, known := s.Properties[k]
		if !known {
			p = s.AdditionalProperties
		}
		if known && p.MinLength != nil && *p.MinLength == 1 && v[k] == "" && slices.Contains(s.Required, k) {
			// A required name or command given empty is as good as missing, and is told the same way.
			return &toolError{text: "Missing required parameter: " + join(path, k) + " (it is empty)"}
		}
		if err := p.check(v[k], join(path, k), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (s *argSchema) checkType(v any, path string) error {
	want := ""
	switch s.Type {
	case "":
		return nil
	case "string":
		if _, ok := v.(string); !ok {
			want = "a string"
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			want = "a boolean"
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != math.Trunc(f) || math.IsInf(f, 0) {
			want = "an integer"
		}
	case "number":
		if _, ok := v.(float64); !ok {
			want = "a number"
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			want = "an object"
		}
	case "array":
		if _, ok := v.([]any); !ok {
			want = "an array"
		}
	}
	if want == "" {
		return nil
	}
	return &toolError{text: fmt.Sprintf("Invalid parameter %s: expected %s, got %s", path, want, jsonKind(v))}
}

func (s *argSchema) checkNumber(n float64, path string) error {
	below := s.Minimum != nil && n < *s.Minimum
	above := s.Maximum != nil && n > *s.Maximum
	if !below && !above {
		return nil
	}
	var want string
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		want = fmt.Sprintf("between %s and %s", number(*s.Minimum), number(*s.Maximum))
	case below:
		want = "at least " + number(*s.Minimum)
	default:
		want = "at most " + number(*s.Maximum)
	}
	if s.Default != nil {
		want += " (default " + word(s.Default) + ")"
	}
	return &toolError{text: fmt.Sprintf("Invalid %s %s: it must be %s.", path, number(n), want)}
}

func (s *argSchema) checkString(v, path string) error {
	n := utf8.RuneCountInString(v)
	switch {
	case s.MinLength != nil && *s.MinLength == 1 && n == 0:
		if s.Default != nil {
			return &toolError{text: fmt.Sprintf("Invalid %s: it is empty; leave it out for its default, %s.", path,
				word(s.Default))}
		}
		return &toolError{text: fmt.Sprintf("Invalid %s: it is empty.", path)}
	case s.MinLength != nil && n < *s.MinLength:
		return &toolError{text: fmt.Sprintf("Invalid %s: it is %d characters long, under %d.", path, n, *s.MinLength)}
	case s.MaxLength != nil && n > *s.MaxLength:
		return &toolError{text: fmt.Sprintf("Invalid %s: it is %d characters long, over %d.", path, n, *s.MaxLength)}
	}
	return nil
}

func (s *argSchema) unknown(name string) error {
	known := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		known = append(known, k)
	}
	slices.Sort(known)
	if len(known) == 0 {
		return &toolError{text: fmt.Sprintf("Unknown parameter: %s (this takes no parameters)", name)}
	}
	return &toolError{text: fmt.Sprintf("Unknown parameter: %s (parameters are: %s; names are case-sensitive)", name,
		strings.Join(known, ", "))}
}

// join is the path of a property of the object at path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonKind words the JSON type of a decoded value for a message, with the value of a number.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		return "number " + number(v)
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// number words a JSON number as written, without an exponent.
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// word is a value of the schema (a default, an enum's value) as a message shows it.
func word(v any) string {
	if f, ok := v.(float64); ok {
		return number(f)
	}
	return fmt.Sprint(v)
}

// echoValue is a value the schema refused, quoted and shortened for the message.
func echoValue(v any) string {
	if s, ok := v.(string); ok {
		return "'" + echo(s) + "'"
	}
	b, _ := json.Marshal(v)
	return echo(string(b))
}

// orList words enum values as "a, b or c".
func orList(values []any) string {
	words := make([]string, len(values))
	for i, v := range values {
		words[i] = word(v)
	}
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// binder makes a tool's argument struct from a call: the JSON the client sent decoded over the definition's
// defaults, so that a parameter the call leaves out has its default. A pointer field is one whose absence means
// something to the tool (e2b_exec's timeout_ms: no default timeout beyond the foreground limit): it stays nil
// when left out, whatever default the schema publishes for it.
//
// A tool whose parameters are all strings (e2b_write_file's content) takes them from the map mcp-go decoded from
// the same JSON, as encoding/json would bind them, rather than decoding the JSON once more: a pass over a big
// content less.
type binder[A any] struct {
	defaults A
	// strings is each parameter's field when every field of A is a string parameter; nil otherwise.
	strings map[string]int
}

func newBinder[A any](defaults A) binder[A] {
	rv := reflect.ValueOf(&defaults).Elem()
	strs := map[string]int{}
	for i := range rv.NumField() {
		if rv.Field(i).Kind() == reflect.Pointer && rv.Field(i).CanSet() {
			rv.Field(i).SetZero()
		}
		if name := jsonName(rv.Type().Field(i)); name != "" && rv.Field(i).Kind() == reflect.String && strs != nil {
			strs[name] = i
		} else {
			strs = nil
		}
	}
	return binder[A]{defaults: defaults, strings: strs}
}

// fromDecoded binds the arguments mcp-go decoded from the call's JSON, when they are all string parameters of
// their exact names, which encoding/json would bind alike; ok is false for anything else (a name in another
// case, a null, a number), which bind decodes from the JSON.
func (b binder[A]) fromDecoded(req mcp.CallToolRequest) (args A, ok bool) {
	decoded, isMap := req.Params.Arguments.(map[string]any)
	if b.strings == nil || !isMap || len(req.Params.RawArguments) == 0 {
		// No map, or one an in-process caller made rather than decoded (its strings may not be valid UTF-8, which
		// encoding them would mend).
		return args, false
	}
	args = b.defaults
	rv := reflect.ValueOf(&args).Elem()
	for name, v := range decoded {
		i, known := b.strings[name]
		s, isString := v.(string)
		if !known || !isString {
			return args, false
		}
		rv.Field(i).SetString(s)
	}
	return args, true
}

// bind decodes the call's arguments with encoding/json, from the JSON the client sent, over the defaults (or takes
// them from the map decoded already, see fromDecoded). The arguments have passed Check, so its errors are those of
// values Check lets through and a field cannot hold (a number beyond the field's range).
func (b binder[A]) bind(req mcp.CallToolRequest) (A, error) {
	if args, ok := b.fromDecoded(req); ok {
		return args, nil
	}
	args := b.defaults
	raw, err := rawArguments(req)
	if err != nil {
		return args, userErrorf("Invalid arguments: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return args, nil
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return args, userErrorf("Invalid arguments: expected a JSON object of parameters, got %s", te.Value)
			}
			return args, userErrorf("Invalid parameter %s: expected %s, got %s", te.Field, jsonTypeName(te.Type.String()),
				te.Value)
		}
		return args, userErrorf("Invalid arguments: %v", err)
	}
	return args, nil
}

// valueOr is *p, or def when p is nil: a pointer argument's value, or what the call's leaving it out means.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
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
