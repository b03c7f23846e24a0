package emulator

import (
	"strings"
	"testing"
)

// Without the code interpreter, E2B's template is refused with the reason rather than as an unknown template.
func TestCodeInterpreterTemplateRefusedWithTheReason(t *testing.T) {
	s := newCPServer(t, Options{})
	a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": codeInterpreterTemplate})
	if a.status != 400 || !strings.Contains(string(a.body), "template 'code-interpreter-v1' is not offered here") {
		t.Fatalf("create of %s: %d %s", codeInterpreterTemplate, a.status, a.body)
	}
}

// A sandbox of another template has nothing on port 49999, with the code interpreter or without.
func TestCodeInterpreterOnlyInItsTemplate(t *testing.T) {
	s := newCPServer(t, Options{CodeInterpreter: true})
	sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": sb.ID, "E2b-Sandbox-Port": "49999"})
	if a.status != 502 || !strings.Contains(string(a.body), "port is not open") {
		t.Fatalf("port 49999 of a base sandbox: %d %s", a.status, a.body)
	}
}
