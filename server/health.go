package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
)

// The health check's bounds: /healthz answers within a second whatever is wrong, and costs at most one probe per
// healthProbeEvery however many load balancers ask.
const (
	healthProbeEvery   = 500 * time.Millisecond
	healthStoreTimeout = 750 * time.Millisecond
)

// What /healthz tells anyone who asks (it needs no token): what is wrong, never a path or the database's address,
// which go to the server's log.
var (
	errAuditCannotRecord = errors.New("the audit log cannot record calls (is the state directory's disk full?), so " +
		"every call is refused")
	errStoreUnreachable = errors.New("the state store does not answer")
)

// health answers /healthz: 200 while this replica can serve calls, 503 with the reason while something of its own
// keeps it from serving them (its audit log cannot record), so that a load balancer (the README's HAProxy block
// checks it) sends calls to another replica. The state store is not of that kind: replicas share it, and a load
// balancer that took every replica out while the database stalls would fail the calls that would have waited for
// it and gone through; the body says whether the store answers, for monitoring. Probes are kept for
// healthProbeEvery.
type health struct {
	probe func(context.Context) healthState
	log   *slog.Logger

	mu     sync.Mutex
	probed time.Time
	last   healthState
}

// healthState is what a probe found: local keeps this replica from serving calls; store is the state store's
// failure to answer.
type healthState struct{ local, store error }

func (s *Server) newHealth() *health { return &health{probe: s.probeHealth, log: s.log} }

// probeHealth checks that the audit log's directory takes the records of one more call than the log already
// has room for, and whether the state store answers.
func (s *Server) probeHealth(ctx context.Context) healthState {
	var st healthState
	if s.audit != nil {
		if err := roomFor(s.cfg.StateDir, audit.MaxEntryBytes); err != nil {
			st.local = errors.Join(errAuditCannotRecord, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, healthStoreTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		st.store = errors.Join(errStoreUnreachable, err)
	}
	return st
}

// roomFor checks that n more bytes can be written in dir now (it exists, is writable, and its disk is not full),
// by writing them to a file that is removed at once (it seldom leaves the page cache). The audit log takes its
// room ahead, preallocated past the end of its file, so a full disk still lets a few calls in: a load balancer
// should hear of it before they have used that room up.
func roomFor(dir string, n int) error {
	f, err := os.CreateTemp(dir, ".healthz-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	_, err = f.Write(make([]byte, n))
	return err
}

// check is the probe's result, probing again when the last one is older than healthProbeEvery. A change is
// logged with its details.
func (h *health) check(ctx context.Context) healthState {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.probed.IsZero() && time.Since(h.probed) < healthProbeEvery {
		return h.last
	}
	st := h.probe(ctx)
	switch {
	case changed(h.last.local, st.local) && st.local != nil:
		h.log.Error("the server cannot serve calls: /healthz answers 503", "error", st.local)
	case changed(h.last.local, st.local):
		h.log.Info("the server can serve calls again: /healthz answers 200")
	}
	switch {
	case changed(h.last.store, st.store) && st.store != nil:
		h.log.Error("the state store does not answer: calls that need it wait for it", "error", st.store)
	case changed(h.last.store, st.store):
		h.log.Info("the state store answers again")
	}
	h.probed, h.last = time.Now(), st
	return st
}

// changed reports whether a probe's error differs from the last one's.
func changed(last, now error) bool {
	return (last == nil) != (now == nil) || last != nil && last.Error() != now.Error()
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	st := h.check(r.Context())
	store := "state store: answers\n"
	if st.store != nil {
		store = "state store: " + errStoreUnreachable.Error() + " (calls that need it wait for it)\n"
	}
	if st.local != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("unavailable: " + errAuditCannotRecord.Error() + "\n" + store))
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok\n" + store))
}
