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

// Why a server cannot serve calls, as /healthz tells anyone who asks (it needs no token): what is wrong, never a
// path or the database's address, which go to the server's log.
var (
	errAuditCannotRecord = errors.New("the audit log cannot record calls (is the state directory's disk full?), so every call is refused")
	errStoreUnreachable  = errors.New("the state store does not answer")
)

// health answers /healthz: 200 "ok" while the server can serve calls, 503 with the reason while it cannot, so that
// a load balancer (the README's HAProxy block checks it) sends calls to another replica. The probe's result is
// kept for healthProbeEvery.
type health struct {
	probe func(context.Context) error
	log   *slog.Logger

	mu     sync.Mutex
	probed time.Time
	last   error
}

func (s *Server) newHealth() *health { return &health{probe: s.canServe, log: s.log} }

// canServe is nil when calls could be served now: the audit log's directory takes the records of one more call
// than the log already has room for, and the state store answers.
func (s *Server) canServe(ctx context.Context) error {
	if s.audit != nil {
		if err := roomFor(s.cfg.StateDir, audit.MaxEntryBytes); err != nil {
			return errors.Join(errAuditCannotRecord, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, healthStoreTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return errors.Join(errStoreUnreachable, err)
	}
	return nil
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
func (h *health) check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.probed.IsZero() && time.Since(h.probed) < healthProbeEvery {
		return h.last
	}
	err := h.probe(ctx)
	switch {
	case err != nil && (h.last == nil || h.last.Error() != err.Error()):
		h.log.Error("the server cannot serve calls: /healthz answers 503", "error", err)
	case err == nil && h.last != nil:
		h.log.Info("the server can serve calls again: /healthz answers 200")
	}
	h.probed, h.last = time.Now(), err
	return err
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.check(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("unavailable: " + publicReason(err) + "\n"))
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}

// publicReason is the part of a probe's error that /healthz may show.
func publicReason(err error) string {
	for _, reason := range []error{errAuditCannotRecord, errStoreUnreachable} {
		if errors.Is(err, reason) {
			return reason.Error()
		}
	}
	return "the server cannot serve calls"
}
