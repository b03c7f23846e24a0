package tools

import (
	"strings"
	"testing"
)

func TestMarkdownTable(t *testing.T) {
	t.Parallel()
	table := MarkdownTable(All(Deps{}))
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != 2+len(Names()) {
		t.Fatalf("table has %d lines, want a header, a rule and %d rows:\n%s", len(lines), len(Names()), table)
	}
	if lines[0] != "| Tool | Parameters | Annotations | Description |" || lines[1] != "|---|---|---|---|" {
		t.Fatalf("bad header:\n%s", table)
	}
	for i, name := range Names() {
		if !strings.HasPrefix(lines[2+i], "| `"+name+"` | ") {
			t.Errorf("row %d is %q, want tool %s", i, lines[2+i], name)
		}
		if strings.Count(lines[2+i], " | ") != 3 {
			t.Errorf("row %q does not have four cells", lines[2+i])
		}
	}
	for _, want := range []string{
		"| `e2b_exec` | `sandbox_id`, `command`, `cwd?`, `timeout_ms?`, `background?`, `wait_ms?`, `pty?` | destructive, open-world | Run a shell command in a sandbox and wait for it. |",
		"| `e2b_list_sandboxes` | `offset?` | read-only, idempotent, open-world |",
		"| `e2b_list_checkpoints` | `sandbox_id?`, `offset?` | read-only, idempotent |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestFirstSentence(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"One. Two.", "One."},
		{"Uses e.g. dots inside. Then more.", "Uses e.g. dots inside."},
		{"No end", "No end"},
		{"Ask? Yes.", "Ask?"},
		{"Path /a.b/c is fine. Next", "Path /a.b/c is fine."},
	} {
		if got := firstSentence(c.in); got != c.want {
			t.Errorf("firstSentence(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := cell("a|b\nc"); got != `a\|b c` {
		t.Errorf("cell = %q", got)
	}
}
