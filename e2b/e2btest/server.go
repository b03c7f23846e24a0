// Package e2btest is an emulator of E2B for tests and for the local backend: the control-plane REST API and each
// sandbox's envd on one HTTP address, answering as e2b-protocol.md describes. Sandboxes are real: commands run as
// real processes isolated with bubblewrap, each sandbox with its own /home/user and /tmp and no network.
package e2btest

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"time"
)

// Server is a running emulator. Point e2b.Config.APIURL and SandboxURL at URL().
type Server struct {
	opts   Options
	http   *httptest.Server
	mux    *http.ServeMux // control-plane routes
	rec    *Recorder
	envd   *envdService
	faults *faultInjector

	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	snapshots map[string]*snapshot
}

// Options configure an emulator.
type Options struct {
	// APIKeys are the accepted X-API-Key values; each is its own team, which sees only its own sandboxes.
	// Empty means any key of the form e2b_<hex> is accepted (each still its own team).
	APIKeys []string
	// Dir holds the sandboxes' filesystems; empty means a temporary directory removed by Close.
	Dir string
	// EnvdVersion is what sandboxes report; default "0.6.13".
	EnvdVersion string
	// Domain is the domain named in create/connect answers; default "e2b.local".
	Domain string
	// Now is the emulator's clock for sandbox timeouts; default time.Now.
	Now func() time.Time
}

// Sandbox is the emulator's record of one sandbox. Fields are guarded by Server.mu.
type Sandbox struct {
	ID          string
	TemplateID  string
	Team        string // the API key that created it
	Metadata    map[string]string
	EnvVars     map[string]string
	State       string // "running", "paused"
	Secure      bool
	AccessToken string
	EnvdVersion string
	AutoPause   bool
	StartedAt   time.Time
	EndAt       time.Time
	// Dir is the sandbox's filesystem on the host: Dir/home is /home/user and Dir/tmp is /tmp inside it.
	Dir string
	// DefaultUser and DefaultWorkdir are what envd uses when a request names none ("user", "/home/user").
	DefaultUser    string
	DefaultWorkdir string
}

type snapshot struct {
	ID        string
	Names     []string
	Team      string
	SandboxID string
	Dir       string // a copy of the sandbox's filesystem
	EnvVars   map[string]string
}

// envdHostPattern matches the per-sandbox host form <port>-<sandboxID>.<domain>.
var envdHostPattern = regexp.MustCompile(`^(\d+)-([a-z0-9]+)\.`)

// ServeHTTP routes a request to envd when it is addressed to a sandbox (routing headers or host form), else to the
// control plane, as E2B's edge does.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("E2b-Sandbox-Id")
	if id == "" {
		if m := envdHostPattern.FindStringSubmatch(r.Host); m != nil {
			id = m[2]
		}
	}
	if id == "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	s.serveEnvd(w, r, id)
}
