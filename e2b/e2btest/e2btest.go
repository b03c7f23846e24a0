// Package e2btest is the E2B emulator (package emulator) as tests use it: the same emulator, plus what only
// tests need: faults injected the way a real network and a busy E2B misbehave (Faults), a log of every request
// for assertions on the wire format (Requests), and E2B's own envd behind the sandboxes (RealEnvds).
//
// The package must not import the e2b client package: the client's own tests import this one.
package e2btest

import (
	"net/http"

	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
)

// The emulator's types, named here so that a test needs one package.
type (
	Options        = emulator.Options
	Sandbox        = emulator.Sandbox
	SandboxOptions = emulator.SandboxOptions
)

// The states a sandbox can be in.
const (
	StateRunning = emulator.StateRunning
	StatePaused  = emulator.StatePaused
)

// Server is a running emulator whose requests are recorded and pass the fault injector. Point
// e2b.Config.APIURL and SandboxURL at URL().
type Server struct {
	*emulator.Server
	faults *faultInjector
	rec    *Recorder
}

// New starts an emulator as emulator.New does, with the recorder and the fault injector in Options.Hooks
// (which must be nil).
func New(opts Options) (*Server, error) {
	s := &Server{faults: newFaultInjector(), rec: newRecorder()}
	opts.Hooks = hooks{s}
	emu, err := emulator.New(opts)
	if err != nil {
		return nil, err
	}
	s.Server = emu
	return s, nil
}

// Requests returns every request received so far, both planes, in arrival order.
func (s *Server) Requests() []RecordedRequest { return s.rec.requests() }

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() { s.rec.reset() }

// hooks are the emulator's Hooks of a test Server: each request is recorded, then delayed and failed as its
// Faults say.
type hooks struct{ s *Server }

func (h hooks) Arrive(r *http.Request) {
	h.s.rec.record(r)
	h.s.faults.delay(r.Context())
}

func (h hooks) ControlPlane(w http.ResponseWriter, r *http.Request) bool {
	return h.s.faults.controlPlane(w, r)
}

func (h hooks) RefuseCreate(w http.ResponseWriter, _ *http.Request) bool {
	status := h.s.faults.refuseCreate()
	if status == 0 {
		return false
	}
	writeInjected(w, status, h.s.faults.current())
	return true
}

func (h hooks) Created(w http.ResponseWriter, r *http.Request, sandboxID string) bool {
	if !h.s.faults.holdCreate(r.Context(), sandboxID) {
		return true // the client went away while the create was held
	}
	switch cut, status := h.s.faults.afterCreate(); {
	case cut:
		hijackAndClose(w)
		return true
	case status != 0:
		writeInjected(w, status, h.s.faults.current())
		return true
	}
	return false
}

func (h hooks) StreamFrames() int { return h.s.faults.current().CutStreamAfterFrames }
