package policy

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Field is one argument of a call as a human deciding on the call should see it.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// uploadsArg is the argument of uploads (session_path copied to sandbox_path) whose every file a human sees.
const uploadsArg = "upload_files"

// decidingArgs are the arguments that say what a call does, in the order a human approving it reads them: what
// runs, where, what happens to which sandbox. The rest (a write's content, env_vars, a title) follows on request.
var decidingArgs = []string{"command", "code", "cwd", "path", "action", "sandbox_id", "checkpoint_id", "template",
	"count", "timeout_seconds", "timeout_ms"}

// DecidingFields returns the arguments of a call that decide what it does, first the ones a policy judges and a
// human approving it must see: command, path (with the path the sandbox resolves it to when that differs),
// action, sandbox; then checkpoint, template, count and timeouts; then every file an upload writes. Values are in
// full and as sent: showing them safely (escaped, long ones cut in the middle) is for the display.
func DecidingFields(c Call) []Field {
	var out []Field
	for _, name := range decidingArgs {
		v, ok := c.Args[name]
		if !ok {
			continue
		}
		s, isString := v.(string)
		if !isString {
			raw, err := json.Marshal(v)
			if err != nil {
				raw = []byte(fmt.Sprintf("%v", v))
			}
			s = string(raw)
		}
		out = append(out, Field{Name: name, Value: s})
		if name == "path" && isString {
			if abs := SandboxPath(s); abs != s {
				out = append(out, Field{Name: "path in the sandbox", Value: abs})
			}
		}
	}
	if uploads, ok := c.Args[uploadsArg].([]any); ok {
		for _, u := range uploads {
			m, _ := u.(map[string]any)
			src, _ := m["session_path"].(string)
			if dst, ok := uploadTarget(u); ok {
				out = append(out, Field{Name: "upload", Value: src + " -> " + dst})
			}
		}
	}
	return out
}

// OtherArgs returns the arguments DecidingFields does not show, for a display that lists them after it.
func OtherArgs(c Call) map[string]any {
	out := map[string]any{}
	_, uploadsShown := c.Args[uploadsArg].([]any)
	for k, v := range c.Args {
		if slices.Contains(decidingArgs, k) || (k == uploadsArg && uploadsShown) {
			continue
		}
		out[k] = v
	}
	return out
}
