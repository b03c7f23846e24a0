package emulator

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEnvdRouting(t *testing.T) {
	s := newCPServer(t, Options{})
	sb, _ := s.CreateSandbox(cpKeyA, SandboxOptions{})
	proxyError := func(id string) string {
		return `{"sandboxId":"` + id + `","message":"The sandbox was not found","code":502}`
	}
	for name, h := range map[string]map[string]string{
		"headers": {"E2b-Sandbox-Id": "nosuch", "E2b-Sandbox-Port": "49983"},
		"host":    {"Host": "49983-nosuch.e2b.local"},
	} {
		a := cpCallHeaders(t, s, "GET", "/health", nil, h)
		if a.status != 502 || string(a.body) != proxyError("nosuch") || a.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	// A running sandbox reaches envd (whatever envd answers, it is not the edge's 502), with no API key needed.
	a := cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"Host": "49983-" + sb.ID + ".e2b.local"})
	if a.status == 502 {
		t.Fatalf("running sandbox got the edge's 502: %s", a.body)
	}
	a = cpCallHeaders(t, s, "GET", "/", nil, map[string]string{"E2b-Sandbox-Id": sb.ID, "E2b-Sandbox-Port": "8080"})
	if a.status != 502 || !strings.Contains(string(a.body), "port is not open") {
		t.Fatalf("other port: %d %s", a.status, a.body)
	}
	s.Vanish(sb.ID)
	a = cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": sb.ID})
	if a.status != 502 || string(a.body) != proxyError(sb.ID) {
		t.Fatalf("vanished: %d %s", a.status, a.body)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	s, err := New(Options{ExpiryInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := s.CreateSandbox(cpKeyA, SandboxOptions{})
	root := s.root
	s.Close()
	s.Close() // idempotent
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("root left behind: %v", err)
	}
	if _, err := os.Stat(sb.Dir); !os.IsNotExist(err) {
		t.Fatalf("sandbox dir left behind: %v", err)
	}
	// A caller-owned Dir is kept.
	dir := t.TempDir()
	s, err = New(Options{Dir: dir, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("caller's dir removed: %v", err)
	}
}

// An emulator whose address is taken fails to start with an error that says so, and leaves nothing behind.
func TestNewOnABoundPortFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "sandboxes")
	s, err := New(Options{Addr: taken.Addr().String(), Dir: dir, ExpiryInterval: -1})
	if err == nil {
		s.Close()
		t.Fatalf("New on %s, a bound address, started an emulator", taken.Addr())
	}
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "listening on "+taken.Addr().String()) {
		t.Fatalf("New on a bound address: %v", err)
	}
	// The port is free again once the other listener has gone: the same address then serves.
	taken.Close()
	s, err = New(Options{Addr: taken.Addr().String(), Dir: dir, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URL() != "http://"+taken.Addr().String() {
		t.Fatalf("URL %s, want the address given", s.URL())
	}
	resp, err := http.Get(s.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health answered %d", resp.StatusCode)
	}
}
