package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/policy"
)

// A human approving a call judges what it will do, so both places that ask (the question in the chat and the
// approval page) show every argument as the call will use it: not through the audit log's redaction, which
// replaces whatever looks like a secret (`OPENAI_API_KEY="$(curl ... | sh)"` would read as
// `OPENAI_API_KEY=[redacted]`) and keeps only a value's head (where the end of a file, with an appended
// `curl ... | sh`, is lost). Each value is escaped and shown by its head and tail (display.Readable); only a value
// that is exactly a credential of a known format is hidden, and the mask says what it hid (audit.TokenFormat).

// maxArgKeyBytes bounds an argument's name as shown; a name is the caller's, and could be a megabyte long.
const maxArgKeyBytes = 200

// maxArgDepth bounds the nesting of arguments shown: no tool's arguments nest deeper.
const maxArgDepth = 16

// argFields is every argument of args as name and readable value, in name order, nested ones named by their
// path (env_vars.HOME, upload_files[0].sandbox_path); each value is at most about max bytes (0: no bound).
func argFields(args map[string]any, max int) []policy.Field {
	var out []policy.Field
	appendArg(&out, "", args, max, 0)
	return out
}

// callFields are the arguments of c as a human judges them: those that decide the policy, and the others, each
// value at most about max bytes (the approval page's).
func callFields(c policy.Call, max int) (deciding, others []policy.Field) {
	return decidingFields(c, max), argFields(policy.OtherArgs(c), max)
}

func appendArg(out *[]policy.Field, name string, v any, max, depth int) {
	if depth > maxArgDepth {
		*out = append(*out, policy.Field{Name: name, Value: "(nested too deep to show)"})
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 && name != "" {
			*out = append(*out, policy.Field{Name: name, Value: "{}"})
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			key := display.Prefix(k, maxArgKeyBytes)
			if name != "" {
				key = name + "." + key
			}
			appendArg(out, key, x[k], max, depth+1)
		}
	case []any:
		if len(x) == 0 {
			*out = append(*out, policy.Field{Name: name, Value: "[]"})
		}
		for i, item := range x {
			appendArg(out, name+"["+strconv.Itoa(i)+"]", item, max, depth+1)
		}
	case string:
		*out = append(*out, policy.Field{Name: name, Value: readableValue(x, max)})
	default:
		raw, err := json.Marshal(x)
		if err != nil {
			raw = []byte(fmt.Sprint(x))
		}
		*out = append(*out, policy.Field{Name: name, Value: display.Readable(string(raw), max)})
	}
}

// readableValue is one string argument as a human judges it: masked when it is exactly a known credential,
// else escaped with its head and tail (see above).
func readableValue(s string, max int) string {
	if kind := audit.TokenFormat(s); kind != "" {
		return fmt.Sprintf("[masked: %s, %d characters]", kind, utf8.RuneCountInString(s))
	}
	return display.Readable(s, max)
}

// decidingFields are the fields a policy decides on (policy.DecidingFields), each readable in at most about max
// bytes.
func decidingFields(c policy.Call, max int) []policy.Field {
	fields := policy.DecidingFields(c)
	for i := range fields {
		fields[i].Value = readableValue(fields[i].Value, max)
	}
	return fields
}
