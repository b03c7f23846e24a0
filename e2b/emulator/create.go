package emulator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// Creating sandboxes: POST /sandboxes (and /v2), CreateSandbox, and the templates and snapshots a create names.

// SandboxOptions describe a sandbox to create directly through the emulator (without HTTP), for tests that need
// many sandboxes or a sandbox in a given state quickly.
type SandboxOptions struct {
	TemplateID string // default "base"
	Timeout    time.Duration
	AutoPause  bool
	// AutoResume resumes the sandbox, paused, when envd traffic reaches it (with AutoPause only).
	AutoResume bool
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
		team: apiKey, templateID: o.TemplateID, timeout: o.Timeout, autoPause: o.AutoPause, autoPauseMemory: true,
		autoResume: o.AutoResume, secure: o.Secure, metadata: cloneMap(o.Metadata), envVars: cloneMap(o.EnvVars),
	})
	if e != nil {
		return Sandbox{}, fmt.Errorf("emulator: create: %d %s", e.status, e.message)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return sb.copy(), nil
}

type createParams struct {
	team, templateID string
	timeout          time.Duration
	autoPause        bool
	autoPauseMemory  bool
	autoResume       bool
	secure           bool
	allowInternet    *bool
	network          *wire.Network
	metadata         map[string]string
	envVars          map[string]string
}

// lifecycle is what happens to a sandbox at its timeout, as create set it.
type lifecycle struct {
	autoPause, autoPauseMemory, autoResume bool
}

// createLifecycle checks create's lifecycle fields as E2B does: autoPauseMemory (default true) only with
// autoPause, and a pause without memory cannot be resumed by traffic (resuming cold-boots it). autoResume without
// autoPause is refused too, as E2B's SDKs refuse to send it.
func createLifecycle(autoPause, memory *bool, resume *wire.AutoResume) (lifecycle, *apiError) {
	lc := lifecycle{autoPause: autoPause != nil && *autoPause, autoPauseMemory: memory == nil || *memory,
		autoResume: resume != nil && resume.Enabled}
	switch {
	case !lc.autoPauseMemory && !lc.autoPause:
		return lc, errorf(http.StatusBadRequest, "autoPauseMemory=false only applies when autoPause is true.")
	case !lc.autoPauseMemory && lc.autoResume:
		return lc, errorf(http.StatusBadRequest, "autoPauseMemory=false takes a filesystem-only snapshot, which cannot be "+
			"auto-resumed by traffic and must be resumed explicitly.")
	case lc.autoResume && !lc.autoPause:
		return lc, errorf(http.StatusBadRequest, "autoResume only applies when autoPause is true.")
	}
	return lc, nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, team string) {
	if s.hooks.RefuseCreate(w, r) {
		return
	}
	v2 := strings.HasPrefix(r.URL.Path, "/v2/")
	var body wire.NewSandbox
	var into any = &body.NewSandboxV2
	if !v2 {
		into = &body
	}
	if e := decodeBody(r, into, true); e != nil {
		writeAPIError(w, e)
		return
	}
	if e := checkNetwork(body.Network); e != nil {
		writeAPIError(w, e)
		return
	}
	if body.TemplateID == nil {
		WriteError(w, http.StatusBadRequest,
			`Error when parsing request: request body has an error: doesn't match schema: property "templateID" is missing`)
		return
	}
	timeout, e := s.parseTimeout(body.Timeout)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	if s.opts.NoLifecycle {
		for _, f := range []struct {
			name string
			sent bool
		}{{"autoResume", body.AutoResume != nil}, {"autoPauseMemory", body.AutoPauseMemory != nil}, {"autoPause",
			body.AutoPause != nil}} {
			if f.sent {
				WriteError(w, http.StatusBadRequest, fmt.Sprintf("Error when parsing request: request body has an error: doesn't "+
					"match schema: property %q is unsupported", f.name))
				return
			}
		}
	}
	lc, e := createLifecycle(body.AutoPause, body.AutoPauseMemory, body.AutoResume)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	sb, e := s.createSandbox(createParams{
		team: team, templateID: *body.TemplateID, timeout: timeout,
		autoPause: lc.autoPause, autoPauseMemory: lc.autoPauseMemory, autoResume: lc.autoResume,
		secure:        v2 || (body.Secure != nil && *body.Secure),
		allowInternet: body.AllowInternetAccess, network: body.Network, metadata: body.Metadata, envVars: body.EnvVars,
	})
	if e != nil {
		writeAPIError(w, e)
		return
	}
	if s.hooks.Created(w, r, sb.ID) {
		return
	}
	s.mu.Lock()
	answer := s.sandboxAnswer(sb)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, answer)
}

// templateRef is what a templateID in a create names.
type templateRef struct {
	templateID string    // answered as the sandbox's templateID
	alias      string    // answered as alias
	snap       *snapshot // nil for a base template
}

// resolveTemplate finds a template or snapshot by ID, name or alias, with an optional ":tag". Call with s.mu held;
// codeInterpreter says whether the code-interpreter template is offered (asked before s.mu is taken, as the
// answer may wait for a check of this machine).
func (s *Server) resolveTemplate(team, ref string, codeInterpreter bool) (templateRef, *apiError) {
	identifier, tag := splitTag(ref)
	if identifier == "" {
		return templateRef{}, errorf(http.StatusBadRequest, "Invalid template reference: template name cannot be empty")
	}
	if identifier == baseTemplate || slices.Contains(s.opts.Templates, identifier) ||
		identifier == codeInterpreterTemplate && codeInterpreter {
		if tag != "" && tag != "default" {
			return templateRef{}, errorf(http.StatusNotFound, "template '%s' with tag '%s' not found", identifier, tag)
		}
		return templateRef{templateID: identifier, alias: identifier}, nil
	}
	if identifier == codeInterpreterTemplate {
		// E2B's own template, which an emulator without the code interpreter names as such.
		return templateRef{}, errorf(http.StatusBadRequest, "template '%s' is not offered here: the code interpreter "+
			"needs /usr/bin/python3 with jupyter_client and ipykernel (Debian: apt-get install "+
			"python3-jupyter-server python3-ipykernel)", identifier)
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
	if s.opts.Envd == nil {
		if err := s.Isolated(); err != nil {
			return nil, errorf(http.StatusInternalServerError, "%v", err)
		}
	}
	identifier, _ := splitTag(p.templateID)
	codeInterpreter := identifier == codeInterpreterTemplate && s.codeInterpreterOffered()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, "Service is shutting down")
	}
	ref, e := s.resolveTemplate(p.team, p.templateID, codeInterpreter)
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
		AutoPauseMemory:     p.autoPauseMemory,
		AutoResume:          p.autoResume,
		TrafficToken:        trafficToken(p.network),
		Timeout:             p.timeout,
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
