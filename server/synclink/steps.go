package synclink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/tools"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// Begun is the answer to a link's first step: what the link is for, and the manifest of the last sync in (nil:
// none).
type Begun struct {
	Link     tools.SyncLink      `json:"link"`
	Manifest *workspace.Manifest `json:"manifest"`
}

// listRequest is the body of the list step: the names the listing prunes (those the user's tree ignores).
type listRequest struct {
	Prune []string `json:"prune"`
}

// maxListBody bounds the list step's body, the names the listing prunes.
const maxListBody = 1 << 20

// stepRun is one step of a redeemed link.
type stepRun struct {
	h    *Handler
	w    http.ResponseWriter
	raw  http.ResponseWriter // w unwrapped, for MaxBytesReader, which tells the server to close the connection
	r    *http.Request
	call tools.Caller
	link tools.SyncLink
	step string
	// expires is when the spent ticket would have: a ticket to send the step again (retry) expires no later.
	expires time.Time
	start   time.Time
	moved   *audit.Transfer
	// release gives back the place of a body held whole once it is held no more (Options.HoldBody).
	release func()
	begun   bool     // the answer's body has begun: a failure can no longer change its status
	held    []func() // give back the places taken by hold
}

// hold takes a place for size bytes the step is about to hold whole after its ticket was spent (Options.HoldBytes),
// given back when the step ends.
func (s *stepRun) hold(size int64) error {
	release, err := s.h.o.HoldBytes(s.r.Context(), size)
	if err == nil {
		s.held = append(s.held, release)
	}
	return err
}

func (s *stepRun) run() {
	defer func() {
		for _, release := range s.held {
			release()
		}
	}()
	var err error
	switch s.step {
	case stepBegin:
		err = s.begin()
	case stepIn:
		err = s.in()
	case stepList:
		err = s.list()
	case stepFetch:
		err = s.fetch()
	case stepRebase:
		err = s.rebase()
	default:
		err = fmt.Errorf("no step %q", s.step) // the ticket named it, so this server made it: a defect
	}
	s.record(err)
}

// next answers with the ticket of the steps that may follow.
func (s *stepRun) next(steps ...string) error {
	t, _, err := s.h.o.Links.issue(s.call, s.link, steps...)
	if err != nil {
		return err
	}
	s.w.Header().Set(NextHeader, t)
	return nil
}

func (s *stepRun) begin() error {
	man, err := s.h.o.Transfers.Manifest(s.r.Context(), s.call, s.link, s.hold)
	if err != nil {
		return err
	}
	next := stepIn
	if s.link.Direction == tools.SyncDirectionOut {
		next = stepList
	}
	if err := s.next(next); err != nil {
		return err
	}
	answerJSON(s.w, Begun{Link: s.link, Manifest: man})
	return nil
}

// perEntry bounds what one entry of a sync in's stream takes besides its content: its header, a PAX header with a
// path and a symlink's target of at most workspace.MaxNameBytes each, the padding, and its line in the deletions
// and the manifest (JSON may escape a byte as six).
const perEntry = 64 << 10

// manifestCap bounds the manifest of a sync within l.
func manifestCap(l workspace.Limits) int64 {
	return min(tools.MaxManifestBytes, int64(l.MaxEntries)*perEntry)
}

// inCap bounds the stream of a sync in within l: the content, what each entry takes besides, and a margin. A stream
// the checks let through fits in it; past it is what they cannot see (PAX headers that the next one replaces,
// say), and the step is refused with 413.
func inCap(l workspace.Limits) int64 {
	return l.MaxTotalBytes + int64(l.MaxEntries)*perEntry + manifestCap(l) + 1<<20
}

func (s *stepRun) in() error {
	body := &workspace.CountingReader{R: http.MaxBytesReader(s.raw, s.r.Body, inCap(s.h.o.Transfers.Limits()))}
	// The deletions and the manifest, held whole at the stream's end until the sandbox has them, take a place then:
	// a place for the whole upload would turn the others' large calls away for as long as it lasts.
	got, err := s.h.o.Transfers.Receive(s.r.Context(), s.call, s.link, body, manifestCap(s.h.o.Transfers.Limits()),
		s.hold)
	s.moved = &audit.Transfer{BytesIn: body.N}
	if err != nil {
		return err
	}
	s.moved.FilesIn = got.Entries
	answerJSON(s.w, got)
	return nil
}

func (s *stepRun) list() error {
	var body bytes.Buffer
	if err := readBody(s.raw, s.r, maxListBody, &body); err != nil {
		return err
	}
	var req listRequest
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		return &workspace.RefusedError{Text: "the list step's body is not one: " + err.Error()}
	}
	out, err := s.h.o.Transfers.List(s.r.Context(), s.call, s.link, req.Prune, s.hold)
	if err != nil {
		return err
	}
	next := []string{stepFetch}
	if s.link.Apply {
		next = append(next, stepRebase)
	}
	if err := s.next(next...); err != nil {
		return err
	}
	s.w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = s.w.Write(out)
	return nil
}

func (s *stepRun) fetch() error {
	paths, err := readPaths(s.raw, s.r, s.h.o.Transfers.Limits())
	if err != nil {
		return err
	}
	r, err := s.h.o.Transfers.Fetch(s.r.Context(), s.call, s.link, paths)
	files := len(paths)
	s.release() // the paths are the sandbox's now; the tar streams for as long as the member takes it
	if err != nil {
		return err
	}
	defer r.Close()
	if s.link.Apply {
		if err := s.next(stepRebase); err != nil {
			return err
		}
	}
	s.w.Header().Set("Content-Type", "application/x-tar")
	s.begun = true
	n, err := io.Copy(s.w, r)
	s.moved = &audit.Transfer{FilesOut: files, BytesOut: n}
	if err != nil {
		// The answer has begun: the command line sees the tar cut short. The audit log says why.
		return fmt.Errorf("sending the sandbox's files: %w", err)
	}
	return nil
}

// readPaths reads a fetch's NUL-separated paths (workspace.ReadPaths) as they come, their total within the
// limits' bound of a list of paths (413 past it).
func readPaths(w http.ResponseWriter, r *http.Request, limits workspace.Limits) ([]string, error) {
	return workspace.ReadPaths(http.MaxBytesReader(w, r.Body, limits.MaxPathListBytes()), limits)
}

func (s *stepRun) rebase() error {
	var body bytes.Buffer
	if err := readBody(s.raw, s.r, manifestCap(s.h.o.Transfers.Limits()), &body); err != nil {
		return err
	}
	if err := s.h.o.Transfers.Rebase(s.r.Context(), s.call, s.link, body.Bytes()); err != nil {
		return err
	}
	s.w.WriteHeader(http.StatusNoContent)
	return nil
}

// retryAfter is the Retry-After of a step turned away for want of a place after its ticket was spent: short, as the
// server has waited for a place already (server/limits.go).
const retryAfter = "1"

// retry answers a step turned away for want of a place after its ticket was spent (busy), the sandbox untouched,
// with a ticket for the same step in RetryHeader: the same member (the one this answer goes to), session, link and
// step, used once, expiring no later than the spent one. The command line sends the step again with it after
// Retry-After, and the model need not ask for a new link for a moment's shortage. It returns the answer's text.
func (s *stepRun) retry(busy error) string {
	text := "Nothing was synced: " + busy.Error()
	again := claims{SyncLink: s.link, Next: []string{s.step}}
	t, _, err := s.h.o.Links.tickets.IssueBefore(binding(s.call, s.link), again, s.expires)
	if err != nil {
		s.h.o.Log.Error("issuing the ticket to send a sync step again", "step", s.step, "error", err)
		text += "; ask for a new link (call the sync tool again) in a moment."
	} else {
		s.w.Header().Set(RetryHeader, t)
		text += "; the step can be sent again in a moment with this answer's ticket (e2b-mcp sync does so by itself)."
	}
	s.w.Header().Set("Retry-After", retryAfter)
	refuse(s.w, http.StatusServiceUnavailable, text)
	return text
}

// record answers a step's failure (a refusal is the caller's to correct, 413 a body over its cap, 502 a failure
// of the sandbox or E2B) unless the answer has begun, and writes the step to the audit log, with what it moved.
func (s *stepRun) record(err error) {
	outcome, text := audit.OutcomeOK, ""
	if err != nil {
		outcome = audit.OutcomeError
		var refused bool
		text, refused = s.h.o.Transfers.ErrorText(s.r.Context(), s.call, err)
		var tooBig *http.MaxBytesError
		switch {
		case s.begun:
		case errors.Is(err, ErrBusy):
			text = s.retry(err)
		case errors.As(err, &tooBig):
			text = fmt.Sprintf("Nothing was synced: what was sent is over the server's limit of %d bytes for this step; "+
				"exclude what the sandbox does not need.", tooBig.Limit)
			refuse(s.w, http.StatusRequestEntityTooLarge, text)
		case refused:
			refuse(s.w, http.StatusUnprocessableEntity, text)
		default:
			refuse(s.w, http.StatusBadGateway, text)
		}
	}
	args := map[string]any{"direction": s.link.Direction, "step": s.step, "remote_path": s.link.RemotePath}
	rerr := s.h.o.Record(audit.Entry{Time: s.start.UTC(), Owner: s.call.Owner, Session: s.call.Session,
		Tool: AuditTool, Args: args, Decision: "link", Outcome: outcome, Error: text,
		DurationMS: s.h.o.Now().Sub(s.start).Milliseconds(), SandboxID: s.link.SandboxID, Transfer: s.moved})
	if rerr != nil {
		s.h.o.Log.Error("recording a sync link's step", "owner", s.call.Owner, "step", s.step, "error", rerr)
	}
}
