package e2btest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func TestFaults(t *testing.T) {
	s := newTestServer(t)
	s.FailNext(2, 429)
	for range 2 {
		a := call(t, s, "GET", "/v2/sandboxes", nil, "")
		if a.status != 429 || a.errorCode(t) != 429 || a.header.Get("Retry-After") != "1" {
			t.Fatalf("injected: %d %v", a.status, a.header)
		}
	}
	if a := call(t, s, "GET", "/v2/sandboxes", nil, ""); a.status != 200 {
		t.Fatalf("after: %d", a.status)
	}
	// A create answered by FailNext creates nothing.
	s.FailNext(1, 503)
	if a := create(t, s); a.status != 503 || len(s.Sandboxes()) != 0 {
		t.Fatalf("failed create: %d, %d sandboxes", a.status, len(s.Sandboxes()))
	}

	// Refused creates are not performed; other requests are served meanwhile.
	s.SetFaults(Faults{RefuseCreate: 1, RefuseCreateStatus: 504})
	if a := call(t, s, "GET", "/v2/sandboxes", nil, ""); a.status != 200 {
		t.Fatalf("list while refusing creates: %d", a.status)
	}
	if a := create(t, s); a.status != 504 || len(s.Sandboxes()) != 0 {
		t.Fatalf("refused create: %d, %d sandboxes", a.status, len(s.Sandboxes()))
	}
	if a := create(t, s); a.status != 201 {
		t.Fatalf("create after refusal: %d", a.status)
	}
	for _, sb := range s.Sandboxes() {
		s.Vanish(sb.ID)
	}

	// The same seed gives the same failures.
	pattern := func() []int {
		s.SetFaults(Faults{FailRate: 0.5, Seed: 42, FailStatus: 502, HTMLBody: true})
		var got []int
		for range 20 {
			a := call(t, s, "GET", "/v2/sandboxes", nil, "")
			if a.status == 502 && !strings.Contains(string(a.body), "<title>502 Bad Gateway</title>") {
				t.Fatalf("html body %s", a.body)
			}
			got = append(got, a.status)
		}
		return got
	}
	p1, p2 := pattern(), pattern()
	if !slices.Equal(p1, p2) || !slices.Contains(p1, 502) || !slices.Contains(p1, 200) {
		t.Fatalf("patterns %v %v", p1, p2)
	}

	// A create whose connection is cut after it was performed.
	s.SetFaults(Faults{CutAfterCreate: 1})
	req, _ := http.NewRequest("POST", s.URL()+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	req.Header.Set("X-API-Key", testKey)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("cut create answered %d", resp.StatusCode)
	}
	if n := len(s.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes after a cut create", n)
	}
	if s.CurrentFaults().CutAfterCreate != 0 {
		t.Fatal("counter not used up")
	}
	s.SetFaults(Faults{FailAfterCreate: 1})
	if a := create(t, s); a.status != 502 || len(s.Sandboxes()) != 2 {
		t.Fatalf("fail after create: %d, %d sandboxes", a.status, len(s.Sandboxes()))
	}
	if a := create(t, s); a.status != 201 {
		t.Fatalf("next create: %d", a.status)
	}
}

func TestHoldCreatesWaitsWithTheSandboxMade(t *testing.T) {
	s := newTestServer(t)
	created, release := s.HoldCreates()
	done := make(chan answer, 1)
	go func() { done <- create(t, s) }()
	id := waitfor.Recv(t, created, 30*time.Second, "the held create's sandbox")
	if _, ok := s.Sandbox(id); !ok {
		t.Fatalf("held create's sandbox %s does not exist", id)
	}
	select {
	case a := <-done:
		t.Fatalf("held create answered %d before release", a.status)
	default:
	}
	release()
	if a := waitfor.Recv(t, done, 30*time.Second, "the released create's answer"); a.status != 201 || !strings.Contains(string(a.body), id) {
		t.Fatalf("released create answered %d %s", a.status, a.body)
	}
	// After release creates answer at once again.
	if a := create(t, s); a.status != 201 {
		t.Fatalf("create after release answered %d", a.status)
	}
}

// startCommand starts command in sandbox id over envd's process.Process/Start and returns the stream's frames
// and the error that ended reading it (nil for a stream that ended whole).
func startCommand(t *testing.T, s *Server, id, command string) (frames []string, readErr error) {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", command}}})
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/process.Process/Start", bytes.NewReader(connectframe.Append(nil, 0, msg)))
	req.Header.Set("Content-Type", connectframe.ContentTypeStream)
	req.Header.Set("E2b-Sandbox-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(resp.Body)
	r := connectframe.NewReader(bytes.NewReader(data), len(data))
	for {
		_, payload, err := r.Next()
		if err != nil {
			return frames, readErr
		}
		frames = append(frames, string(payload))
	}
}

func TestCutStreamAfterFrames(t *testing.T) {
	s := newTestServer(t)
	sb, err := s.CreateSandbox(testKey, SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetFaults(Faults{CutStreamAfterFrames: 2})
	frames, err := startCommand(t, s, sb.ID, "echo a; echo b; echo c")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the cut stream: %v, want %v (a cut ends the response mid-stream, with no end-of-stream message)", err, io.ErrUnexpectedEOF)
	}
	if len(frames) != 2 {
		t.Fatalf("%d frames before the cut, want 2: %q", len(frames), frames)
	}
	s.SetFaults(Faults{})
	if frames, err := startCommand(t, s, sb.ID, "true"); err != nil || len(frames) != 3 {
		t.Fatalf("after the fault: %q, %v", frames, err)
	}
}
