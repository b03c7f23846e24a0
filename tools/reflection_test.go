package tools

import (
	"encoding/json"
	"testing"
)

// The schemas reflected once per process are those of the configuration at hand: two servers of one process with
// other defaults (a default template) each publish their own, and a tool built again publishes what it did.
func TestReflectionsFollowTheDefaults(t *testing.T) {
	t.Parallel()
	inputSchema := func(cfg Config, tool string) string {
		t.Helper()
		for _, tl := range All(Deps{Config: cfg}) {
			if tl.Tool.Name == tool {
				return string(tl.Tool.RawInputSchema)
			}
		}
		t.Fatalf("no tool %s", tool)
		return ""
	}
	defaultTemplate := func(schema string) any {
		var s struct {
			Properties map[string]struct {
				Default any `json:"default"`
			} `json:"properties"`
		}
		if err := json.Unmarshal([]byte(schema), &s); err != nil {
			t.Fatal(err)
		}
		return s.Properties["template"].Default
	}
	a := inputSchema(Config{DefaultTemplate: "tmpl-a"}, "e2b_create_sandbox")
	b := inputSchema(Config{DefaultTemplate: "tmpl-b"}, "e2b_create_sandbox")
	if got := defaultTemplate(a); got != "tmpl-a" {
		t.Errorf("with the default template tmpl-a the schema's default is %v", got)
	}
	if got := defaultTemplate(b); got != "tmpl-b" {
		t.Errorf("with the default template tmpl-b the schema's default is %v", got)
	}
	if again := inputSchema(Config{DefaultTemplate: "tmpl-a"}, "e2b_create_sandbox"); again != a {
		t.Errorf("built again, the schema is\n%s\nnot\n%s", again, a)
	}
}
