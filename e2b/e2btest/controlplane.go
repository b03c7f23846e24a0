package e2btest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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
		// The routes E2B's current SDKs send (e2b-protocol.md §7): v2 sandboxes are always secured, and connect's
		// body is optional.
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
		writeError(w, http.StatusNotFound, fmt.Sprintf("Path %s not found", r.URL.Path))
	})
	return mux
}

// authed checks X-API-Key and passes the caller's team (its key) on.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, team string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		if !apiKeyPattern.MatchString(key) {
			writeError(w, http.StatusUnauthorized, "Invalid API key format")
			return
		}
		if !s.keyAccepted(key) {
			writeError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key for more information.")
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
func (s *Server) withSandboxID(h func(w http.ResponseWriter, r *http.Request, team, id string)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, team string) {
		id, ok := shortID(r.PathValue("sandboxID"))
		if !ok {
			writeError(w, http.StatusBadRequest, "Invalid sandbox ID")
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

func writeAPIError(w http.ResponseWriter, e *apiError) { writeError(w, e.status, e.message) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Error encoding response")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decodeBody decodes a JSON request body into v. An empty body is an error when required, else leaves v as is.
func decodeBody(r *http.Request, v any, required bool) *apiError {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return errorf(http.StatusBadRequest, "Error when parsing request: %s", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if required {
			return errorf(http.StatusBadRequest, "Error when parsing request: request body has an error: value is required but missing")
		}
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errorf(http.StatusBadRequest, "Error when parsing request: %s", err)
	}
	return nil
}

// Wire shapes. They mirror E2B's API types (oapi-codegen): optional fields omitted, nullable ones sent as null.

type sandboxJSON struct {
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	Domain             *string `json:"domain"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	EnvdVersion        string  `json:"envdVersion"`
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
}

type listedJSON struct {
	Alias       string            `json:"alias,omitempty"`
	ClientID    string            `json:"clientID"`
	CPUCount    int               `json:"cpuCount"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EndAt       time.Time         `json:"endAt"`
	EnvdVersion string            `json:"envdVersion"`
	MemoryMB    int               `json:"memoryMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	StartedAt   time.Time         `json:"startedAt"`
	State       string            `json:"state"`
	TemplateID  string            `json:"templateID"`
}

type lifecycleJSON struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

type detailJSON struct {
	listedJSON
	AllowInternetAccess *bool         `json:"allowInternetAccess"`
	Domain              *string       `json:"domain"`
	EnvdAccessToken     string        `json:"envdAccessToken,omitempty"`
	Lifecycle           lifecycleJSON `json:"lifecycle"`
}

type snapshotJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

type forkResultJSON struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// The following conversions read sandbox fields and must be called with s.mu held.

func (s *Server) sandboxAnswer(sb *Sandbox) sandboxJSON {
	domain := s.opts.Domain
	return sandboxJSON{
		Alias:           sb.Alias,
		ClientID:        clientID,
		Domain:          &domain,
		EnvdAccessToken: sb.AccessToken,
		EnvdVersion:     sb.EnvdVersion,
		SandboxID:       sb.ID,
		TemplateID:      sb.TemplateID,
	}
}

func listed(sb *Sandbox) listedJSON {
	return listedJSON{
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

func (s *Server) detail(sb *Sandbox) detailJSON {
	domain := s.opts.Domain
	onTimeout := "kill"
	if sb.AutoPause {
		onTimeout = "pause"
	}
	d := detailJSON{
		listedJSON:      listed(sb),
		Domain:          &domain,
		EnvdAccessToken: sb.AccessToken,
		Lifecycle:       lifecycleJSON{OnTimeout: onTimeout},
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
	var body struct {
		Timeout *int64 `json:"timeout"`
	}
	if e := decodeBody(r, &body, true); e != nil {
		return nil, e
	}
	if propertyRequired && body.Timeout == nil {
		return nil, errorf(http.StatusBadRequest, "%s", `Error when parsing request: request body has an error: doesn't match schema: property "timeout" is missing`)
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

// SandboxOptions describe a sandbox to create directly through the emulator (without HTTP), for tests that need
// many sandboxes or a sandbox in a given state quickly.
type SandboxOptions struct {
	TemplateID string // default "base"
	Timeout    time.Duration
	AutoPause  bool
	Secure     bool
	Metadata   map[string]string
	EnvVars    map[string]string
}

// CreateSandbox creates a sandbox for the team of apiKey as POST /sandboxes would, and returns a copy of it.
func (s *Server) CreateSandbox(apiKey string, o SandboxOptions) (Sandbox, error) {
	if o.TemplateID == "" {
		o.TemplateID = baseTemplate
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	sb, e := s.createSandbox(createParams{
		team: apiKey, templateID: o.TemplateID, timeout: o.Timeout, autoPause: o.AutoPause, secure: o.Secure,
		metadata: cloneMap(o.Metadata), envVars: cloneMap(o.EnvVars),
	})
	if e != nil {
		return Sandbox{}, fmt.Errorf("e2btest: create: %d %s", e.status, e.message)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return sb.copy(), nil
}

type createParams struct {
	team, templateID string
	timeout          time.Duration
	autoPause        bool
	secure           bool
	allowInternet    *bool
	network          *Network
	metadata         map[string]string
	envVars          map[string]string
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, team string) {
	if status := s.faults.refuseCreate(); status != 0 {
		writeInjected(w, status, s.faults.current())
		return
	}
	var body struct {
		TemplateID          *string           `json:"templateID"`
		Timeout             *int64            `json:"timeout"`
		AutoPause           *bool             `json:"autoPause"`
		Secure              *bool             `json:"secure"`
		AllowInternetAccess *bool             `json:"allow_internet_access"`
		Metadata            map[string]string `json:"metadata"`
		EnvVars             map[string]string `json:"envVars"`
		Network             *Network          `json:"network"`
	}
	if e := decodeBody(r, &body, true); e != nil {
		writeAPIError(w, e)
		return
	}
	if e := body.Network.check(); e != nil {
		writeAPIError(w, e)
		return
	}
	if body.TemplateID == nil {
		writeError(w, http.StatusBadRequest, `Error when parsing request: request body has an error: doesn't match schema: property "templateID" is missing`)
		return
	}
	timeout, e := s.parseTimeout(body.Timeout)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	v2 := strings.HasPrefix(r.URL.Path, "/v2/")
	sb, e := s.createSandbox(createParams{
		team: team, templateID: *body.TemplateID, timeout: timeout,
		autoPause: body.AutoPause != nil && *body.AutoPause, secure: v2 || (body.Secure != nil && *body.Secure),
		allowInternet: body.AllowInternetAccess, network: body.Network, metadata: body.Metadata, envVars: body.EnvVars,
	})
	if e != nil {
		writeAPIError(w, e)
		return
	}
	if !s.faults.holdCreate(r.Context(), sb.ID) {
		return
	}
	switch cut, status := s.faults.afterCreate(); {
	case cut:
		hijackAndClose(w)
		return
	case status != 0:
		writeInjected(w, status, s.faults.current())
		return
	}
	s.mu.Lock()
	answer := s.sandboxAnswer(sb)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, answer)
}

// hijackAndClose drops the connection without an answer, as a network failure after the request was sent does.
func hijackAndClose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: the server resets the stream instead
	}
	_ = conn.Close()
}

// templateRef is what a templateID in a create names.
type templateRef struct {
	templateID string    // answered as the sandbox's templateID
	alias      string    // answered as alias
	snap       *snapshot // nil for a base template
}

// resolveTemplate finds a template or snapshot by ID, name or alias, with an optional ":tag". Call with s.mu held.
func (s *Server) resolveTemplate(team, ref string) (templateRef, *apiError) {
	identifier, tag := splitTag(ref)
	if identifier == "" {
		return templateRef{}, errorf(http.StatusBadRequest, "Invalid template reference: template name cannot be empty")
	}
	if identifier == baseTemplate || slices.Contains(s.opts.Templates, identifier) {
		if tag != "" && tag != "default" {
			return templateRef{}, errorf(http.StatusNotFound, "template '%s' with tag '%s' not found", identifier, tag)
		}
		return templateRef{templateID: identifier, alias: identifier}, nil
	}
	slug := teamSlug(team)
	var other bool
	for _, sn := range s.snapshots {
		if !sn.matches(identifier, slug) && !(sn.Team != team && sn.matches(identifier, teamSlug(sn.Team))) {
			continue
		}
		if sn.Team != team {
			other = true
			continue
		}
		if _, snapTag := splitTag(sn.ID); tag != "" && tag != snapTag {
			return templateRef{}, errorf(http.StatusNotFound, "template '%s' with tag '%s' not found", identifier, tag)
		}
		alias := ""
		if len(sn.Names) > 0 {
			alias = sn.Names[0]
		}
		return templateRef{templateID: sn.TemplateID, alias: alias, snap: sn}, nil
	}
	if other {
		return templateRef{}, errorf(http.StatusForbidden, "you don't have access to template '%s'", identifier)
	}
	return templateRef{}, errorf(http.StatusNotFound, "template '%s' not found", identifier)
}

// matches reports whether identifier names this snapshot: its template ID, one of its names, or a name without
// the namespace of the team it belongs to (slug).
func (sn *snapshot) matches(identifier, slug string) bool {
	if identifier == sn.TemplateID {
		return true
	}
	for _, n := range sn.Names {
		if identifier == n || slug+"/"+identifier == n {
			return true
		}
	}
	return false
}

// splitTag splits "name:tag" (the tag may follow only the last path segment).
func splitTag(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}

func (s *Server) createSandbox(p createParams) (*Sandbox, *apiError) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, "Service is shutting down")
	}
	ref, e := s.resolveTemplate(p.team, p.templateID)
	s.mu.Unlock()
	if e != nil {
		return nil, e
	}
	id := "i" + randomID(19)
	dir := filepath.Join(s.root, "sandboxes", id)
	envVars := map[string]string{}
	if ref.snap != nil {
		ref.snap.mu.RLock()
		err := os.MkdirAll(filepath.Dir(dir), 0o755)
		if err == nil {
			err = copyTree(ref.snap.Dir, dir)
		}
		for k, v := range ref.snap.EnvVars {
			envVars[k] = v
		}
		ref.snap.mu.RUnlock()
		if err != nil {
			_ = removeTree(dir)
			if errors.Is(err, os.ErrNotExist) { // deleted while we were copying
				return nil, errorf(http.StatusNotFound, "template '%s' not found", p.templateID)
			}
			return nil, errorf(http.StatusInternalServerError, "Failed to create sandbox: %s", err)
		}
	} else if err := seedSandboxDir(dir); err != nil {
		_ = removeTree(dir)
		return nil, errorf(http.StatusInternalServerError, "Failed to create sandbox: %s", err)
	}
	for k, v := range p.envVars {
		envVars[k] = v
	}
	now := s.now()
	sb := &Sandbox{
		ID:                  id,
		TemplateID:          ref.templateID,
		Alias:               ref.alias,
		Team:                p.team,
		Metadata:            cloneMap(p.metadata),
		EnvVars:             envVars,
		State:               StateRunning,
		Secure:              p.secure,
		EnvdVersion:         s.opts.EnvdVersion,
		AutoPause:           p.autoPause,
		AllowInternetAccess: p.allowInternet,
		Network:             withInternetAccess(p.network, p.allowInternet),
		StartedAt:           now,
		EndAt:               now.Add(p.timeout),
		Dir:                 dir,
		DefaultUser:         "user",
		DefaultWorkdir:      "/home/user",
		lifecycle:           &sync.Mutex{},
	}
	if p.secure {
		sb.AccessToken = randomHex(32)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = removeTree(dir)
		return nil, errorf(http.StatusServiceUnavailable, "Service is shutting down")
	}
	s.sandboxes[id] = sb
	s.mu.Unlock()
	return sb, nil
}

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
	var body struct {
		Memory *bool `json:"memory"`
	}
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
	sb.State = StatePaused
	sb.EndAt = s.now()
	s.mu.Unlock()
	s.envd.freeze(sb)
	return nil
}

// resume brings a paused sandbox back for timeout. It reports whether the sandbox was paused; a running one has
// its end time extended (never shortened) instead.
func (s *Server) resume(team, id string, timeout time.Duration, resumeOnly bool) (answer sandboxJSON, resumed bool, e *apiError) {
	sb, e := s.holdSandbox(team, id)
	if e != nil {
		return sandboxJSON{}, false, e
	}
	defer sb.lifecycle.Unlock()
	if sb.State == StateRunning {
		defer s.mu.Unlock()
		if resumeOnly {
			return sandboxJSON{}, false, errorf(http.StatusConflict, "Sandbox %s is already running", id)
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
		var body struct {
			Timeout *int64 `json:"timeout"`
		}
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
		writeError(w, http.StatusBadRequest, "Error when parsing request: request body has an error: doesn't match schema: number must be at least 0")
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
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(team, id)
	if sb == nil || sb.State != StateRunning {
		writeAPIError(w, sandboxNotFound(id))
		return
	}
	sb.EndAt = s.now().Add(timeout) // may shorten: E2B's timeout endpoint sets, it does not only extend
	w.WriteHeader(http.StatusNoContent)
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
			writeError(w, http.StatusBadRequest, "Error when parsing request: request body has an error: doesn't match schema: duration must be between 0 and 3600")
			return
		}
		d = max(time.Duration(*body.Duration)*time.Second, defaultTimeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(team, id)
	if sb == nil || sb.State != StateRunning {
		writeAPIError(w, sandboxNotFound(id))
		return
	}
	if end := s.now().Add(d); end.After(sb.EndAt) {
		sb.EndAt = end
	}
	w.WriteHeader(http.StatusNoContent)
}

// pageItem is one entry of a listing that pages with E2B's cursor: time and ID of the entry.
type pageItem struct {
	t  time.Time
	id string
	v  any
}

// paginate sorts items (newest first, or oldest first when asc; ties by ID), skips those up to the cursor in
// token and cuts a page of limit, returning the token of the next page ("" on the last).
func paginate(items []pageItem, limit int, token string, asc bool) ([]pageItem, string, error) {
	slices.SortFunc(items, func(a, b pageItem) int {
		if !a.t.Equal(b.t) {
			if asc {
				return a.t.Compare(b.t)
			}
			return b.t.Compare(a.t)
		}
		return strings.Compare(a.id, b.id)
	})
	if token != "" {
		ct, cid, err := parseCursor(token, asc)
		if err != nil {
			return nil, "", err
		}
		kept := items[:0]
		for _, it := range items {
			var after bool
			if asc {
				after = it.t.After(ct) || it.t.Equal(ct) && it.id > cid
			} else {
				after = it.t.Before(ct) || it.t.Equal(ct) && it.id > cid
			}
			if after {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) <= limit {
		return items, "", nil
	}
	last := items[limit-1]
	return items[:limit], makeCursor(last.t, last.id, asc), nil
}

// makeCursor is E2B's opaque page token: base64url("<RFC3339Nano>__<id>"), with "__asc" for ascending order.
func makeCursor(t time.Time, id string, asc bool) string {
	c := t.UTC().Format(time.RFC3339Nano) + "__" + id
	if asc {
		c += "__asc"
	}
	return base64.URLEncoding.EncodeToString([]byte(c))
}

func parseCursor(token string, asc bool) (time.Time, string, error) {
	raw, err := base64.URLEncoding.DecodeString(token)
	if err != nil {
		return time.Time{}, "", err
	}
	parts := strings.Split(string(raw), "__")
	switch {
	case len(parts) == 2 && !asc, len(parts) == 3 && asc && parts[2] == "asc":
	default:
		return time.Time{}, "", errors.New("invalid cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return time.Time{}, "", err
	}
	return t, parts[1], nil
}

// parseLimit reads the limit query parameter: default and maximum 100, at least 1.
func parseLimit(q url.Values) (int, *apiError) {
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return 0, errorf(http.StatusBadRequest, "Invalid format for parameter limit: %q", v)
		}
		limit = int(min(n, 100))
	}
	return limit, nil
}

// parseMetadataFilter decodes the metadata query parameter as E2B's server does (parseFilters): the value is
// query-unescaped as a whole, split on & and =, and each key and value unescaped again.
func parseMetadataFilter(raw string) (map[string]string, error) {
	query, err := url.QueryUnescape(raw)
	if err != nil {
		return nil, err
	}
	filters := map[string]string{}
	for _, pair := range strings.Split(query, "&") {
		parts := strings.Split(pair, "=")
		if len(parts) != 2 {
			return nil, errors.New("invalid key value pair in query")
		}
		k, err := url.QueryUnescape(parts[0])
		if err != nil {
			return nil, err
		}
		v, err := url.QueryUnescape(parts[1])
		if err != nil {
			return nil, err
		}
		filters[k] = v
	}
	return filters, nil
}

func matchesMetadata(md, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, team string) {
	q := r.URL.Query()
	states := map[string]bool{}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st != StateRunning && st != StatePaused {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format for parameter state: value %q is not one of the allowed values", st))
				return
			}
			states[st] = true
		}
	}
	if len(states) == 0 {
		states[StateRunning], states[StatePaused] = true, true
	}
	var filter map[string]string
	if q.Has("metadata") {
		f, err := parseMetadataFilter(q.Get("metadata"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "Error parsing metadata")
			return
		}
		filter = f
	}
	limit, e := parseLimit(q)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	asc := false
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		asc = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format for parameter order: value %q is not one of the allowed values", o))
		return
	}
	var startedAfter time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid format for parameter startedAfter: %s", err))
			return
		}
		startedAfter = t
	}
	template := q.Get("template")

	s.mu.Lock()
	var items []pageItem
	running := 0
	for _, sb := range s.sandboxes {
		if sb.Team != team || !states[sb.State] || !matchesMetadata(sb.Metadata, filter) ||
			template != "" && sb.TemplateID != template && sb.Alias != template ||
			sb.StartedAt.Before(startedAfter) {
			continue
		}
		if sb.State == StateRunning {
			running++
		}
		items = append(items, pageItem{t: sb.StartedAt, id: sb.ID, v: listed(sb)})
	}
	s.mu.Unlock()

	page, next, err := paginate(items, limit, q.Get("nextToken"), asc)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid next token")
		return
	}
	if states[StateRunning] {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	out := make([]listedJSON, 0, len(page))
	for _, it := range page {
		out = append(out, it.v.(listedJSON))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleListV1 is the deprecated GET /sandboxes: running sandboxes only, no paging.
func (s *Server) handleListV1(w http.ResponseWriter, r *http.Request, team string) {
	var filter map[string]string
	if q := r.URL.Query(); q.Has("metadata") {
		f, err := parseMetadataFilter(q.Get("metadata"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "Error parsing metadata: "+err.Error())
			return
		}
		filter = f
	}
	s.mu.Lock()
	var items []pageItem
	for _, sb := range s.sandboxes {
		if sb.Team == team && sb.State == StateRunning && matchesMetadata(sb.Metadata, filter) {
			items = append(items, pageItem{t: sb.StartedAt, id: sb.ID, v: listed(sb)})
		}
	}
	s.mu.Unlock()
	page, _, _ := paginate(items, len(items)+1, "", false)
	out := make([]listedJSON, 0, len(page))
	for _, it := range page {
		out = append(out, it.v.(listedJSON))
	}
	writeJSON(w, http.StatusOK, out)
}

// teamSlug is the namespace of a team's named snapshots.
func teamSlug(team string) string {
	sum := sha256.Sum256([]byte(team))
	return "team-" + hex.EncodeToString(sum[:4])
}

// checkpoint copies a running sandbox's filesystem to dst while its processes are frozen, so that the copy is
// consistent, and lets them continue afterwards. It fails with 404 when the sandbox is not running (E2B checkpoints
// only live sandboxes) and with pausedMsg (409) when it is paused and pausedMsg is set.
func (s *Server) checkpoint(team, id, dst, pausedMsg string) (*Sandbox, *apiError) {
	sb, e := s.holdSandbox(team, id)
	if e != nil {
		return nil, e
	}
	defer sb.lifecycle.Unlock()
	state := sb.State
	s.mu.Unlock()
	switch {
	case state == StatePaused && pausedMsg != "":
		return nil, errorf(http.StatusConflict, "%s", pausedMsg)
	case state != StateRunning:
		return nil, sandboxNotFound(id)
	}
	s.envd.freeze(sb)
	err := os.MkdirAll(filepath.Dir(dst), 0o755)
	if err == nil {
		err = copyTree(sb.Dir, dst)
	}
	s.envd.thaw(sb)
	if err != nil {
		_ = removeTree(dst)
		return nil, errorf(http.StatusInternalServerError, "Error creating snapshot template")
	}
	return sb, nil
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request, team, id string) {
	var body struct {
		Name *string `json:"name"`
	}
	if e := decodeBody(r, &body, true); e != nil {
		writeAPIError(w, e)
		return
	}
	slug := teamSlug(team)
	var name, tag = "", "default"
	if body.Name != nil {
		identifier, t := splitTag(*body.Name)
		if t != "" {
			tag = t
		}
		alias := identifier
		if ns, a, ok := strings.Cut(identifier, "/"); ok {
			if ns != slug {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("namespace '%s' does not match the team's namespace '%s'", ns, slug))
				return
			}
			alias = a
		}
		if !aliasPattern.MatchString(alias) || !aliasPattern.MatchString(tag) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid name: %q is not a valid template name", *body.Name))
			return
		}
		name = slug + "/" + alias
	}
	snapDir := filepath.Join(s.root, "snapshots", randomID(20))
	sb, e := s.checkpoint(team, id, snapDir, "")
	if e != nil {
		writeAPIError(w, e)
		return
	}

	s.mu.Lock()
	sn := &snapshot{
		Team: team, SandboxID: id, Dir: snapDir, EnvVars: cloneMap(sb.EnvVars),
		TemplateID: randomID(20), BaseTemplateID: sb.TemplateID, CreatedAt: s.now(), mu: &sync.RWMutex{},
	}
	sn.ID = sn.TemplateID + ":" + tag
	var replaced *snapshot
	if name != "" {
		sn.Names = []string{name}
		sn.ID = name + ":" + tag
		// A name already taken by this team gets a new build under the same template, as in E2B.
		if old, ok := s.snapshots[sn.ID]; ok && old.Team == team {
			sn.TemplateID = old.TemplateID
			replaced = old
		}
	}
	s.snapSeq++
	sn.seq = s.snapSeq
	s.snapshots[sn.ID] = sn
	answer := snapshotJSON{SnapshotID: sn.ID, Names: slices.Clone(sn.Names)}
	s.mu.Unlock()
	if answer.Names == nil {
		answer.Names = []string{}
	}
	if replaced != nil {
		replaced.mu.Lock()
		_ = removeTree(replaced.Dir)
		replaced.mu.Unlock()
	}
	writeJSON(w, http.StatusCreated, answer)
}

func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request, team string) {
	q := r.URL.Query()
	limit, e := parseLimit(q)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	sandboxID := q.Get("sandboxID")
	if sandboxID != "" {
		sandboxID, _ = shortID(sandboxID)
	}
	name := q.Get("name")
	s.mu.Lock()
	var items []pageItem
	for _, sn := range s.snapshots {
		if sn.Team != team || sandboxID != "" && sn.SandboxID != sandboxID ||
			name != "" && !sn.matches(strings.TrimSuffix(name, ":"+tagOf(sn.ID)), teamSlug(team)) {
			continue
		}
		// Snapshots taken within one tick of the emulator's clock keep their creation order.
		t := sn.CreatedAt.Add(time.Duration(sn.seq))
		items = append(items, pageItem{t: t, id: sn.TemplateID, v: snapshotJSON{SnapshotID: sn.ID, Names: nonNil(sn.Names)}})
	}
	s.mu.Unlock()
	page, next, err := paginate(items, limit, q.Get("nextToken"), false)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid next token")
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	out := make([]snapshotJSON, 0, len(page))
	for _, it := range page {
		out = append(out, it.v.(snapshotJSON))
	}
	writeJSON(w, http.StatusOK, out)
}

func tagOf(id string) string { _, t := splitTag(id); return t }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request, team string) {
	ref := r.PathValue("templateID")
	identifier, tag := splitTag(ref)
	s.mu.Lock()
	var found *snapshot
	for key, sn := range s.snapshots {
		if sn.Team != team || !sn.matches(identifier, teamSlug(team)) || tag != "" && tag != tagOf(sn.ID) {
			continue
		}
		found = sn
		delete(s.snapshots, key)
		break
	}
	s.mu.Unlock()
	if found == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", identifier))
		return
	}
	found.mu.Lock()
	_ = removeTree(found.Dir)
	found.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, team, id string) {
	var body struct {
		Timeout *int64 `json:"timeout"`
		Count   *int64 `json:"count"`
	}
	if e := decodeBody(r, &body, false); e != nil {
		writeAPIError(w, e)
		return
	}
	timeout, e := s.parseTimeout(body.Timeout)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	count := int64(1)
	if body.Count != nil {
		count = *body.Count
	}
	switch {
	case count < 1:
		writeError(w, http.StatusBadRequest, "Count must be at least 1")
		return
	case count > 100:
		writeError(w, http.StatusBadRequest, "Count cannot be greater than 100")
		return
	}
	checkpointDir := filepath.Join(s.root, "snapshots", "fork-"+randomID(20))
	defer func() { _ = removeTree(checkpointDir) }()
	orig, e := s.checkpoint(team, id, checkpointDir, fmt.Sprintf("Sandbox '%s' is paused and cannot be forked; resume it first", id))
	if e != nil {
		writeAPIError(w, e)
		return
	}
	s.mu.Lock()
	base := *orig
	base.Metadata = cloneMap(orig.Metadata)
	base.EnvVars = cloneMap(orig.EnvVars)
	s.mu.Unlock()

	results := make([]forkResultJSON, count)
	for i := range results {
		sb, e := s.forkOne(&base, checkpointDir, timeout)
		if e != nil {
			results[i].Error = &struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}{e.status, e.message}
			continue
		}
		s.mu.Lock()
		answer := s.sandboxAnswer(sb)
		s.mu.Unlock()
		results[i].Sandbox = &answer
	}
	writeJSON(w, http.StatusCreated, results)
}

// forkOne boots one fork of base from the checkpoint in dir: a new sandbox with base's template, metadata,
// environment and settings, a fresh ID and (when secure) a fresh access token.
func (s *Server) forkOne(base *Sandbox, dir string, timeout time.Duration) (*Sandbox, *apiError) {
	id := "i" + randomID(19)
	sbDir := filepath.Join(s.root, "sandboxes", id)
	if err := copyTree(dir, sbDir); err != nil {
		_ = removeTree(sbDir)
		return nil, errorf(http.StatusInternalServerError, "Failed to create sandbox: %s", err)
	}
	now := s.now()
	sb := &Sandbox{
		ID: id, TemplateID: base.TemplateID, Alias: base.Alias, Team: base.Team,
		Metadata: cloneMap(base.Metadata), EnvVars: cloneMap(base.EnvVars), State: StateRunning,
		Secure: base.Secure, EnvdVersion: base.EnvdVersion, AutoPause: base.AutoPause,
		AllowInternetAccess: base.AllowInternetAccess, Network: base.Network.clone(), StartedAt: now, EndAt: now.Add(timeout), Dir: sbDir,
		DefaultUser: base.DefaultUser, DefaultWorkdir: base.DefaultWorkdir, lifecycle: &sync.Mutex{},
	}
	if sb.Secure {
		sb.AccessToken = randomHex(32)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = removeTree(sbDir)
		return nil, errorf(http.StatusServiceUnavailable, "Service is shutting down")
	}
	s.sandboxes[id] = sb
	return sb, nil
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomID returns n random characters of [a-z0-9], the alphabet of E2B's sandbox and template IDs.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withInternetAccess folds allow_internet_access false into the configuration: it means denyOut [0.0.0.0/0].
func withInternetAccess(n *Network, allow *bool) *Network {
	n = n.clone()
	if allow == nil || *allow {
		return n
	}
	if n == nil {
		n = &Network{}
	}
	if !slices.Contains(n.DenyOut, allTraffic) {
		n.DenyOut = append(n.DenyOut, allTraffic)
	}
	return n
}

// handleNetwork is PUT /sandboxes/{id}/network: the body replaces the sandbox's whole egress configuration (a
// field left out is cleared). New connections of the sandbox follow it at once.
func (s *Server) handleNetwork(w http.ResponseWriter, r *http.Request, team, id string) {
	var body struct {
		Network
		AllowInternetAccess *bool `json:"allow_internet_access"`
	}
	if e := decodeBody(r, &body, false); e != nil {
		writeAPIError(w, e)
		return
	}
	if e := body.Network.check(); e != nil {
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
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is not running", id))
		return
	}
	sb.Network = withInternetAccess(&body.Network, body.AllowInternetAccess)
	w.WriteHeader(http.StatusNoContent)
}
