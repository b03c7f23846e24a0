package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/smalldisk"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// /healthz tells a load balancer whether the server can serve calls: 503 with the reason, within a second, once
// the state directory is full (the audit log could record no call, so every call would be refused), and 200
// again once space returns. The reason names what is wrong and none of the server's paths.
func TestHealthFailsWhenCallsCannotBeRecorded(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	smalldisk.Mount(t, disk, 2<<20)
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, mutate: func(cfg *Config, _ *e2btest.Server) { cfg.StateDir = disk }})
	f.dir = disk
	base := serveHTTP(t, f)
	if code, _, body := do(t, "GET", base+PathHealth, "", "", nil); code != 200 {
		t.Fatalf("/healthz with room: %d %q", code, body)
	}

	filler := smalldisk.Fill(t, disk)
	waitHealth := func(want int) (body string) {
		waitfor.Until(t, 10*time.Second, fmt.Sprintf("/healthz to answer %d", want), func() bool {
			var code int
			code, _, body = do(t, "GET", base+PathHealth, "", "", nil)
			return code == want
		})
		return body
	}
	body := waitHealth(503)
	if !strings.Contains(body, "audit log") || strings.Contains(body, disk) {
		t.Errorf("/healthz on a full disk: %q", body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitHealth(200)
}

// A state store that does not answer leaves /healthz at 200: replicas share the store, and a load balancer that
// took them all out for it would fail every call that would have waited for the store and gone through. The body
// says the store does not answer, without its location.
func TestHealthSaysTheStoreDoesNotAnswer(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP})
	base := serveHTTP(t, f)
	if err := f.srv.Store().Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(healthProbeEvery) // past the last probe's result
	code, _, body := do(t, "GET", base+PathHealth, "", "", nil)
	if code != 200 || !strings.Contains(body, "state store does not answer") || strings.Contains(body, f.srv.Store().Location()) {
		t.Fatalf("/healthz with the store closed: %d %q", code, body)
	}
}
