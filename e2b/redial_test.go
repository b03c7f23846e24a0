package e2b

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// outage is a TCP front for a backend that can be taken down (its port refuses connections) and brought back on
// the same port, as E2B behind a restarting load balancer is.
type outage struct {
	t       *testing.T
	addr    string // the front's host:port, the same across outages
	backend string
	mu      sync.Mutex
	l       net.Listener
	conns   []net.Conn
}

func newOutage(t *testing.T, backendURL string) *outage {
	t.Helper()
	o := &outage{t: t, backend: strings.TrimPrefix(backendURL, "http://")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.addr = l.Addr().String()
	o.serve(l)
	t.Cleanup(o.down)
	return o
}

func (o *outage) url() string { return "http://" + o.addr }

func (o *outage) serve(l net.Listener) {
	o.mu.Lock()
	o.l = l
	o.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", o.backend)
			if err != nil {
				c.Close()
				continue
			}
			o.mu.Lock()
			o.conns = append(o.conns, c, b)
			o.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() { _, _ = io.Copy(c, b); c.Close() }()
		}
	}()
}

// down closes the port and every connection through it: new connections are refused.
func (o *outage) down() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.l != nil {
		o.l.Close()
		o.l = nil
	}
	for _, c := range o.conns {
		c.Close()
	}
	o.conns = nil
}

// upAfter opens the same port again after d.
func (o *outage) upAfter(d time.Duration) {
	time.AfterFunc(d, func() {
		l, err := net.Listen("tcp", o.addr)
		if err != nil {
			o.t.Errorf("reopening %s: %v", o.addr, err)
			return
		}
		o.serve(l)
	})
}

// A call that meets E2B refusing connections is tried again until E2B is back, whatever the call: a create (one
// sandbox is made, not two) and a command (it runs once), over the control plane and envd alike.
func TestRedialsThroughOutage(t *testing.T) {
	srv := cpEmulator(t)
	front := newOutage(t, srv.URL())
	c := cpClient(t, front.url(), func(cfg *Config) { cfg.RedialFor = 10 * time.Second; cfg.RetryWaitMax = 200 * time.Millisecond })
	ctx := cpCtx(t)

	front.down()
	front.upAfter(time.Second)
	sb, err := c.CreateSandbox(ctx, NewSandbox{TemplateID: "base"})
	if err != nil {
		t.Fatalf("a create during a 1 s outage: %v", err)
	}
	if n := len(srv.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes, want 1", n)
	}

	front.down()
	// The client would see its idle connection closed as soon as its reader notices; a command sent in between
	// would go out on it, which is not the case here (nothing sent, nothing reached).
	c.cfg.HTTPClient.CloseIdleConnections()
	front.upAfter(time.Second)
	res, err := c.Envd(c.Conn(sb)).RunCommand(ctx, "echo once >> /tmp/runs; cat /tmp/runs", CommandOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("a command during a 1 s outage: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("the command: %+v", res)
	}
}

// Connections that cannot be made are tried again for Config.RedialFor, or until the call's deadline if that comes
// first; then the call fails saying E2B could not be reached, and how often it was tried.
func TestRedialGivesUp(t *testing.T) {
	dead := cpDeadURL(t)
	c := cpClient(t, dead, func(cfg *Config) { cfg.RedialFor = 300 * time.Millisecond })
	began := time.Now()
	_, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"})
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "connection refused") ||
		!strings.Contains(err.Error(), "gave up after") || strings.Contains(err.Error(), "looking for") {
		t.Fatalf("create against a dead E2B: %v", err)
	}
	// It went on trying (for RedialFor), rather than giving up at the first refusal.
	if m := regexp.MustCompile(`gave up after (\d+) attempts`).FindStringSubmatch(err.Error()); m == nil || m[1] == "1" {
		t.Fatalf("create against a dead E2B: %v; want it tried more than once", err)
	}
	t.Logf("gave up after %v with RedialFor 300 ms", time.Since(began))

	// The call's deadline comes first.
	c = cpClient(t, dead, func(cfg *Config) { cfg.RedialFor = time.Hour; cfg.RetryWaitMax = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began = time.Now()
	// A call that outlived its deadline would try for RedialFor, an hour: the test's bound ends it instead.
	waitfor.Return(t, 30*time.Second, "the command against a dead envd to give up at its deadline", func() {
		_, err = c.Envd(SandboxConn{ID: "sbx1"}).Start(ctx, StartOptions{Process: ProcessConfig{Cmd: "true"}}, nil)
	})
	if !errors.Is(err, ErrNoAnswer) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a command against a dead envd: %v", err)
	}
	t.Logf("gave up after %v with a deadline of 500 ms", time.Since(began))

	// Retries disabled: one attempt.
	c = cpClient(t, dead, func(cfg *Config) { cfg.MaxRetries = -1; cfg.RedialFor = time.Hour })
	_, err = c.GetSandbox(cpCtx(t), "abc")
	if !errors.Is(err, ErrNoAnswer) || strings.Contains(err.Error(), "gave up") {
		t.Fatalf("without retries: %v", err)
	}
}
