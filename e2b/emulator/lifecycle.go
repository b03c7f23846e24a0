package emulator

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// The control plane's calls on one sandbox: get, kill, pause, resume, connect, timeout, refresh and network.

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, team, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(team, id)
	if sb == nil {
		writeAPIError(w, sandboxNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.detail(sb))
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request, team, id string) {
	s.mu.Lock()
	sb := s.lookup(team, id)
	s.mu.Unlock()
	if sb == nil || !s.kill(sb) {
		writeAPIError(w, sandboxNotFound(id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request, team, id string) {
	var body wire.PauseRequest
	if e := decodeBody(r, &body, false); e != nil {
		writeAPIError(w, e)
		return
	}
	if e := s.pause(team, id); e != nil {
		writeAPIError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pause(team, id string) *apiError {
	sb, e := s.holdSandbox(team, id)
	if e != nil {
		return e
	}
	defer sb.lifecycle.Unlock()
	if sb.State == StatePaused {
		s.mu.Unlock()
		return errorf(http.StatusConflict, "Error pausing sandbox - sandbox '%s' is already paused", id)
	}
	s.endRunLocked(sb, s.now())
	sb.State = StatePaused
	sb.EndAt = s.now()
	s.mu.Unlock()
	s.envd.freeze(sb)
	return nil
}

// resume brings a paused sandbox back for timeout. It reports whether the sandbox was paused; a running one has
// its end time extended (never shortened) instead.
func (s *Server) resume(team, id string, timeout time.Duration,
	resumeOnly bool) (answer wire.Sandbox, resumed bool, e *apiError) {
	sb, e := s.holdSandbox(team, id)
	if e != nil {
		return wire.Sandbox{}, false, e
	}
	defer sb.lifecycle.Unlock()
	if sb.State == StateRunning {
		defer s.mu.Unlock()
		if resumeOnly {
			return wire.Sandbox{}, false, errorf(http.StatusConflict, "Sandbox %s is already running", id)
		}
		if end := s.now().Add(timeout); end.After(sb.EndAt) {
			sb.EndAt = end
		}
		return s.sandboxAnswer(sb), false, nil
	}
	s.mu.Unlock()
	// Processes continue before the sandbox is reachable again, as a resumed VM's do.
	s.envd.thaw(sb)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	sb.State = StateRunning
	sb.StartedAt = now
	sb.EndAt = now.Add(timeout)
	return s.sandboxAnswer(sb), true, nil
}

// connectV2Timeout is the timeout of a v2 connect that names none (ConnectSandboxV2's default).
const connectV2Timeout = 300

func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request, team, id string) {
	var seconds *int64
	var e *apiError
	if strings.HasPrefix(r.URL.Path, "/v2/") {
		var body wire.ConnectV2Request // which snapshot a resume starts from: all are memory ones here
		e = decodeBody(r, &body, false)
		if seconds = body.Timeout; seconds == nil {
			seconds = new(int64)
			*seconds = connectV2Timeout
		}
	} else {
		seconds, e = timeoutBody(r, true)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	if *seconds < 0 {
		WriteError(w, http.StatusBadRequest, "Error when parsing request: request body has an error: doesn't match schema: "+
			"number must be at least 0")
		return
	}
	timeout, e := s.capTimeout(*seconds)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	answer, resumed, e := s.resume(team, id, timeout, false)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, answer)
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request, team, id string) {
	seconds, e := timeoutBody(r, false)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	timeout, e := s.parseTimeout(seconds)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	answer, _, e := s.resume(team, id, timeout, true)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, answer)
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request, team, id string) {
	seconds, e := timeoutBody(r, true)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	timeout, e := s.capTimeout(max(*seconds, 0))
	if e != nil {
		writeAPIError(w, e)
		return
	}
	// This may shorten: E2B's timeout endpoint sets the end, it does not only extend it.
	s.moveEnd(w, team, id, func(time.Time) time.Time { return s.now().Add(timeout) })
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request, team, id string) {
	var body struct {
		Duration *int64 `json:"duration"`
	}
	if e := decodeBody(r, &body, false); e != nil {
		writeAPIError(w, e)
		return
	}
	d := defaultTimeout
	if body.Duration != nil {
		if *body.Duration < 0 || *body.Duration > 3600 {
			WriteError(w, http.StatusBadRequest, "Error when parsing request: request body has an error: doesn't match "+
				"schema: duration must be between 0 and 3600")
			return
		}
		d = max(time.Duration(*body.Duration)*time.Second, defaultTimeout)
	}
	s.moveEnd(w, team, id, func(end time.Time) time.Time {
		if refreshed := s.now().Add(d); refreshed.After(end) {
			return refreshed
		}
		return end
	})
}

// moveEnd sets the end time of a running sandbox to what move makes of it and answers 204, or 404 when the
// sandbox is not running.
func (s *Server) moveEnd(w http.ResponseWriter, team, id string, move func(end time.Time) time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(team, id)
	if sb == nil || sb.State != StateRunning {
		writeAPIError(w, sandboxNotFound(id))
		return
	}
	sb.EndAt = move(sb.EndAt)
	w.WriteHeader(http.StatusNoContent)
}

// withInternetAccess folds allow_internet_access false into the configuration: it means denyOut [0.0.0.0/0].
func withInternetAccess(n *wire.Network, allow *bool) *wire.Network {
	n = n.Clone()
	if allow == nil || *allow {
		return n
	}
	if n == nil {
		n = &wire.Network{}
	}
	if !slices.Contains(n.DenyOut, wire.AllTraffic) {
		n.DenyOut = append(n.DenyOut, wire.AllTraffic)
	}
	return n
}

// handleNetwork is PUT /sandboxes/{id}/network: the body replaces the sandbox's whole egress configuration (a
// field left out is cleared). New connections of the sandbox follow it at once.
func (s *Server) handleNetwork(w http.ResponseWriter, r *http.Request, team, id string) {
	var body struct {
		wire.Network
		AllowInternetAccess *bool `json:"allow_internet_access"`
	}
	if e := decodeBody(r, &body, false); e != nil {
		writeAPIError(w, e)
		return
	}
	if e := checkNetwork(&body.Network); e != nil {
		writeAPIError(w, e)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(team, id)
	switch {
	case sb == nil:
		writeAPIError(w, sandboxNotFound(id))
		return
	case sb.State != StateRunning:
		WriteError(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is not running", id))
		return
	}
	sb.Network = withInternetAccess(&body.Network, body.AllowInternetAccess)
	w.WriteHeader(http.StatusNoContent)
}
