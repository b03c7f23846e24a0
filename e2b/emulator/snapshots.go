package emulator

import (
	"crypto/sha256"
	"encoding/hex"
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

// Snapshots (POST /sandboxes/{id}/snapshots, GET /snapshots, DELETE /templates/{id}) and forks.

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
	var body wire.SnapshotRequest
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
				WriteError(w, http.StatusBadRequest, fmt.Sprintf("namespace '%s' does not match the team's namespace '%s'", ns,
					slug))
				return
			}
			alias = a
		}
		if !aliasPattern.MatchString(alias) || !aliasPattern.MatchString(tag) {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("Invalid name: %q is not a valid template name", *body.Name))
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
	answer := wire.SnapshotInfo{SnapshotID: sn.ID, Names: slices.Clone(sn.Names)}
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
		info := wire.SnapshotInfo{SnapshotID: sn.ID, Names: nonNil(sn.Names)}
		items = append(items, pageItem{t: t, id: sn.TemplateID, v: info})
	}
	s.mu.Unlock()
	page, next, err := paginate(items, limit, q.Get("nextToken"), false)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "Invalid next token")
		return
	}
	writePage[wire.SnapshotInfo](w, page, next)
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
		WriteError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", identifier))
		return
	}
	found.mu.Lock()
	_ = removeTree(found.Dir)
	found.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, team, id string) {
	var body wire.ForkRequest
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
		WriteError(w, http.StatusBadRequest, "Count must be at least 1")
		return
	case count > 100:
		WriteError(w, http.StatusBadRequest, "Count cannot be greater than 100")
		return
	}
	checkpointDir := filepath.Join(s.root, "snapshots", "fork-"+randomID(20))
	defer func() { _ = removeTree(checkpointDir) }()
	orig, e := s.checkpoint(team, id, checkpointDir, fmt.Sprintf("Sandbox '%s' is paused and cannot be "+
		"forked; resume it first", id))
	if e != nil {
		writeAPIError(w, e)
		return
	}
	s.mu.Lock()
	base := *orig
	base.Metadata = cloneMap(orig.Metadata)
	base.EnvVars = cloneMap(orig.EnvVars)
	s.mu.Unlock()

	results := make([]wire.ForkResult, count)
	for i := range results {
		sb, e := s.forkOne(&base, checkpointDir, timeout)
		if e != nil {
			results[i].Error = &wire.Error{Code: e.status, Message: e.message}
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
		AutoPauseMemory: base.AutoPauseMemory, AutoResume: base.AutoResume, Timeout: timeout,
		AllowInternetAccess: base.AllowInternetAccess, Network: base.Network.Clone(), StartedAt: now,
		EndAt: now.Add(timeout), Dir: sbDir,
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
