package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// clientID is the constant E2B answers for the deprecated clientID field.
const clientID = "6532622b"

// defaultTimeout is E2B's sandbox timeout when a create, resume or fork names none.
const defaultTimeout = 15 * time.Second

// Shapes of the emulated template: what E2B's base template reports.
const (
	baseTemplate = "base"
	cpuCount     = 2
	memoryMB     = 512
	diskSizeMB   = 22 * 1024
)

var (
	apiKeyPattern    = regexp.MustCompile(`^e2b_[0-9a-f]+$`)
	sandboxIDPattern = regexp.MustCompile(`^[a-z0-9]+$`)
	aliasPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// apiError is an answer in E2B's error shape.
type apiError struct {
	status  int
	message string
}

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, message: fmt.Sprintf(format, args...)}
}

func sandboxNotFound(id string) *apiError {
	return errorf(http.StatusNotFound, "Sandbox %q doesn't exist or you don't have access to it", id)
}

func (s *Server) controlPlaneRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Health check successful")
	})
	route := func(pattern string, h func(w http.ResponseWriter, r *http.Request, team string)) {
		mux.HandleFunc(pattern, s.authed(h))
	}
	route("POST /sandboxes", s.handleCreate)
	if !s.opts.V1Only {
		// The routes E2B's current SDKs send (docs/e2b.md, "The control plane"): v2 sandboxes are always
		// secured, and connect's body is optional.
		route("POST /v2/sandboxes", s.handleCreate)
		route("POST /v2/sandboxes/{sandboxID}/connect", s.withSandboxID(s.handleConnect))
	}
	route("GET /sandboxes", s.handleListV1)
	route("GET /v2/sandboxes", s.handleList)
	route("GET /sandboxes/{sandboxID}", s.withSandboxID(s.handleGet))
	route("DELETE /sandboxes/{sandboxID}", s.withSandboxID(s.handleKill))
	route("POST /sandboxes/{sandboxID}/pause", s.withSandboxID(s.handlePause))
	route("POST /sandboxes/{sandboxID}/resume", s.withSandboxID(s.handleResume))
	route("POST /sandboxes/{sandboxID}/connect", s.withSandboxID(s.handleConnect))
	route("POST /sandboxes/{sandboxID}/timeout", s.withSandboxID(s.handleTimeout))
	route("POST /sandboxes/{sandboxID}/refreshes", s.withSandboxID(s.handleRefresh))
	route("POST /sandboxes/{sandboxID}/snapshots", s.withSandboxID(s.handleSnapshot))
	route("POST /sandboxes/{sandboxID}/fork", s.withSandboxID(s.handleFork))
	route("PUT /sandboxes/{sandboxID}/network", s.withSandboxID(s.handleNetwork))
	route("GET /snapshots", s.handleListSnapshots)
	route("DELETE /templates/{templateID}", s.handleDeleteTemplate)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("Path %s not found", r.URL.Path))
	})
	return mux
}

// authed checks X-API-Key and passes the caller's team (its key) on.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, team string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		if !apiKeyPattern.MatchString(key) {
			WriteError(w, http.StatusUnauthorized, "Invalid API key format")
			return
		}
		if !s.keyAccepted(key) {
			WriteError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key "+
				"for more information.")
			return
		}
		h(w, r, key)
	}
}

// keyAccepted says whether key (of E2B's form) is let in: any key without APIKeys or AcceptKey, else one they name.
func (s *Server) keyAccepted(key string) bool {
	if len(s.opts.APIKeys) == 0 && s.opts.AcceptKey == nil {
		return true
	}
	return slices.Contains(s.opts.APIKeys, key) || (s.opts.AcceptKey != nil && s.opts.AcceptKey(key))
}

// withSandboxID parses the {sandboxID} path parameter as E2B does: the legacy "<id>-<clientID>" form keeps the
// part before the dash, and anything but [a-z0-9]+ is 400 "Invalid sandbox ID".
func (s *Server) withSandboxID(h func(w http.ResponseWriter, r *http.Request, team,
	id string)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, team string) {
		id, ok := shortID(r.PathValue("sandboxID"))
		if !ok {
			WriteError(w, http.StatusBadRequest, "Invalid sandbox ID")
			return
		}
		h(w, r, team, id)
	}
}

func shortID(raw string) (string, bool) {
	id := raw
	if parts := strings.Split(raw, "-"); len(parts) == 2 {
		id = parts[0]
	}
	return id, sandboxIDPattern.MatchString(id)
}

func writeAPIError(w http.ResponseWriter, e *apiError) { WriteError(w, e.status, e.message) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Error encoding response")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decodeBody decodes a JSON request body into v. An empty body is an error when required, else leaves v as is.
// A field v does not name is refused: the emulator answers only what E2B's SDKs send, so that a client sending
// anything else is caught by its tests instead of being ignored here and misunderstood by E2B.
func decodeBody(r *http.Request, v any, required bool) *apiError {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return errorf(http.StatusBadRequest, "Error when parsing request: %s", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if required {
			return errorf(http.StatusBadRequest, "Error when parsing request: request body has an error: value is "+
				"required but missing")
		}
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errorf(http.StatusBadRequest, "Error when parsing request: %s", err)
	}
	// The body is valid JSON of the right shape: decoding it again, strictly, finds the fields v lacks.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		field, _ := strings.CutPrefix(err.Error(), "json: unknown field ")
		return errorf(http.StatusBadRequest, "Error when parsing request: request body has an error: doesn't match schema: "+
			"property %s is unsupported", field)
	}
	return nil
}

// The answers are E2B's wire types (package wire), which the client reads.

// The following conversions read sandbox fields and must be called with s.mu held.

func (s *Server) sandboxAnswer(sb *Sandbox) wire.Sandbox {
	domain := s.opts.Domain
	answer := wire.Sandbox{
		Alias:           sb.Alias,
		ClientID:        clientID,
		Domain:          &domain,
		EnvdAccessToken: sb.AccessToken,
		EnvdVersion:     sb.EnvdVersion,
		SandboxID:       sb.ID,
		TemplateID:      sb.TemplateID,
	}
	if sb.TrafficToken != "" {
		token := sb.TrafficToken
		answer.TrafficAccessToken = &token
	}
	return answer
}

func listed(sb *Sandbox) wire.ListedSandbox {
	return wire.ListedSandbox{
		Alias:       sb.Alias,
		ClientID:    clientID,
		CPUCount:    cpuCount,
		DiskSizeMB:  diskSizeMB,
		EndAt:       sb.EndAt,
		EnvdVersion: sb.EnvdVersion,
		MemoryMB:    memoryMB,
		Metadata:    cloneMap(sb.Metadata),
		SandboxID:   sb.ID,
		StartedAt:   sb.StartedAt,
		State:       sb.State,
		TemplateID:  sb.TemplateID,
	}
}

func (s *Server) detail(sb *Sandbox) wire.SandboxDetail {
	domain := s.opts.Domain
	onTimeout := wire.OnTimeoutKill
	if sb.AutoPause {
		onTimeout = wire.OnTimeoutPause
	}
	d := wire.SandboxDetail{
		ListedSandbox:   listed(sb),
		Domain:          &domain,
		EnvdAccessToken: sb.AccessToken,
		Lifecycle:       &wire.SandboxLifecycle{OnTimeout: onTimeout, AutoResume: sb.AutoResume},
	}
	if sb.AllowInternetAccess != nil {
		v := *sb.AllowInternetAccess
		d.AllowInternetAccess = &v
	}
	return d
}

// lookup finds a sandbox of team; a sandbox of another team is reported as missing. Call with s.mu held.
func (s *Server) lookup(team, id string) *Sandbox {
	sb := s.sandboxes[id]
	if sb == nil || sb.Team != team {
		return nil
	}
	return sb
}

// holdSandbox takes the lifecycle lock of team's sandbox id, so that no pause, resume, checkpoint or kill of it
// runs meanwhile, and then s.mu, once the sandbox is known to be still the one under id (a kill may have removed
// it while the lock was awaited). On success it returns with both held: the caller unlocks s.mu, then
// sb.lifecycle. A missing sandbox is sandboxNotFound, with neither held.
func (s *Server) holdSandbox(team, id string) (*Sandbox, *apiError) {
	s.mu.Lock()
	sb := s.lookup(team, id)
	s.mu.Unlock()
	if sb == nil {
		return nil, sandboxNotFound(id)
	}
	sb.lifecycle.Lock()
	s.mu.Lock()
	if s.sandboxes[id] != sb {
		s.mu.Unlock()
		sb.lifecycle.Unlock()
		return nil, sandboxNotFound(id)
	}
	return sb, nil
}

// timeoutBody reads the required JSON body {"timeout": seconds} of connect, resume and set-timeout; when
// propertyRequired, as for connect and set-timeout, E2B's schema refuses a body without the property.
func timeoutBody(r *http.Request, propertyRequired bool) (*int64, *apiError) {
	var body wire.TimeoutRequest
	if e := decodeBody(r, &body, true); e != nil {
		return nil, e
	}
	if propertyRequired && body.Timeout == nil {
		return nil, errorf(http.StatusBadRequest, "%s",
			`Error when parsing request: request body has an error: doesn't match schema: property "timeout" is missing`)
	}
	return body.Timeout, nil
}

// parseTimeout reads an optional timeout in seconds as E2B does for create and fork.
func (s *Server) parseTimeout(raw *int64) (time.Duration, *apiError) {
	if raw == nil {
		return defaultTimeout, nil
	}
	if *raw <= 0 {
		return 0, errorf(http.StatusBadRequest, "Timeout must be greater than 0")
	}
	return s.capTimeout(*raw)
}

func (s *Server) capTimeout(seconds int64) (time.Duration, *apiError) {
	if seconds > int64(s.opts.MaxTimeoutHours)*3600 {
		return 0, errorf(http.StatusBadRequest, "Timeout cannot be greater than %d hours", s.opts.MaxTimeoutHours)
	}
	return time.Duration(seconds) * time.Second, nil
}
