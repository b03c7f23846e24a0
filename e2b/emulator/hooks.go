package emulator

import (
	"encoding/json"
	"net/http"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// Hooks are the points at which a test harness (package e2btest) watches the emulator's traffic or makes it
// misbehave the way a real network and a busy E2B do. Each is called on the goroutine of the request concerned.
type Hooks interface {
	// Arrive sees every request as it arrives, both planes, before it is routed. It may replace r.Body (to
	// record it) and may block (to add latency).
	Arrive(r *http.Request)
	// ControlPlane may answer a control-plane request in the emulator's stead; it reports whether it did.
	ControlPlane(w http.ResponseWriter, r *http.Request) bool
	// RefuseCreate may answer a create before it is performed; it reports whether it did.
	RefuseCreate(w http.ResponseWriter, r *http.Request) bool
	// Created is called when a create has been performed (the sandbox exists), before it is answered; it
	// reports whether it answered the request itself or dropped its connection.
	Created(w http.ResponseWriter, r *http.Request, sandboxID string) bool
	// StreamFrames is the number of frames after which envd cuts its streams (process output, directory
	// watches) mid-stream, read when a request starts; 0 never cuts them.
	StreamFrames() int
}

// noHooks is the emulator without a harness: every request is served as E2B would serve it.
type noHooks struct{}

func (noHooks) Arrive(*http.Request)                                    {}
func (noHooks) ControlPlane(http.ResponseWriter, *http.Request) bool    { return false }
func (noHooks) RefuseCreate(http.ResponseWriter, *http.Request) bool    { return false }
func (noHooks) Created(http.ResponseWriter, *http.Request, string) bool { return false }
func (noHooks) StreamFrames() int                                       { return 0 }

// Envd serves the envd of every sandbox in place of the emulated one: e2btest puts E2B's own daemon behind the
// sandboxes this way. The emulator still routes, authenticates the control plane and keeps the records.
type Envd interface {
	// Serve answers an envd request for a running sandbox. An error, returned before anything was written, is
	// answered with the edge's 502.
	Serve(w http.ResponseWriter, r *http.Request, sb EnvdSandbox) error
	// Stop is called when a sandbox is killed (or vanishes, or times out without autoPause).
	Stop(sandboxID string)
	// Close is called once by Server.Close, after every sandbox's emulated processes were stopped.
	Close()
}

// EnvdSandbox is what an Envd is told of the sandbox a request is for.
type EnvdSandbox struct {
	ID string
	// AccessToken is the sandbox's envd access token; "" for a sandbox created without secure.
	AccessToken string
	// EnvVars are the environment variables the sandbox was created with.
	EnvVars map[string]string
}

// WriteError writes E2B's JSON error body {"code","message"} with status, as the control plane answers errors.
func WriteError(w http.ResponseWriter, status int, message string) {
	body, _ := json.Marshal(wire.Error{Code: status, Message: message})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
