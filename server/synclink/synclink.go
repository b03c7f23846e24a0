// Package synclink serves the one-time links with which the sync tools of a server that cannot see the user's disk
// (a team server) work: the tool answers with `e2b-mcp sync in|out --link URL DIR`, and that command, run by the
// member on their machine, talks to this handler. A link is a ticket (server/tickets) bound to the member, their
// session, one sandbox directory, the call's options and the direction, for ten minutes; each step of a sync
// spends its ticket and is given the next one, so that a link is honoured once, by any replica. The handler is
// for the command line alone: it names the caller by bearer token, reads no cookie, and refuses any request a
// browser marks as its own (an Origin, a preflight, Sec-Fetch headers), so that no web page can drive it.
package synclink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server/tickets"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Path is where the links point: a link is Path with its ticket as the fragment (which no HTTP client sends), and
// each step is a POST to Path/STEP with the ticket in TicketHeader.
const Path = "/sync"

// TicketHeader carries a step's ticket; NextHeader the answer's ticket for the next step; RetryHeader, on a 503 of a
// step turned away after its ticket was spent, a ticket for sending the same step again after Retry-After.
const (
	TicketHeader = "X-E2B-MCP-Sync-Ticket"
	NextHeader   = "X-E2B-MCP-Sync-Next"
	RetryHeader  = "X-E2B-MCP-Sync-Retry"
)

// The steps of a sync. In: begin (the manifest), in (the stream). Out: begin, list (the sandbox's listing),
// fetch (a tar of the files that may have changed), and after an apply rebase (the new manifest).
const (
	stepBegin  = "begin"
	stepIn     = "in"
	stepList   = "list"
	stepFetch  = "fetch"
	stepRebase = "rebase"
)

// KeyLabel names the links' key among those derived from the data key replicas share.
const KeyLabel = "e2b-mcp sync links"

// TTL is how long a link, and each step's ticket, works.
const TTL = 10 * time.Minute

// AuditTool names a redeemed link's steps in the audit log, where tool calls have the tool.
const AuditTool = "e2b-mcp sync"

// claims are what a ticket lets its holder do: the link, and the steps it may take next.
type claims struct {
	tools.SyncLink
	Next []string `json:"st"`
}

// Owners name the caller of a request by its bearer token (httpauth.Bearer), writing the 401 when they cannot.
type Owners interface {
	Owner(w http.ResponseWriter, r *http.Request) (string, bool)
}

// Links makes the links (tools.SyncLinks) and the tickets of their steps.
type Links struct {
	tickets *tickets.Tickets // of KeyLabel, TTL

	mu   sync.Mutex
	base string
}

// NewLinks makes the links of tickets, which are of KeyLabel and TTL.
func NewLinks(t *tickets.Tickets) *Links { return &Links{tickets: t} }

// SetBase sets the address the links point at once it is known (the public URL, or the listener's address).
func (k *Links) SetBase(base string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.base = strings.TrimSuffix(base, "/")
}

// Link is a link for call to do l.
func (k *Links) Link(call tools.Caller, l tools.SyncLink) (string, time.Time, error) {
	k.mu.Lock()
	base := k.base
	k.mu.Unlock()
	if base == "" {
		return "", time.Time{}, errors.New("this server has no address to put in a sync link: start it with --public-url")
	}
	t, expires, err := k.issue(call, l, stepBegin)
	if err != nil {
		return "", time.Time{}, err
	}
	return base + Path + "#" + t, expires, nil
}

func (k *Links) issue(call tools.Caller, l tools.SyncLink, next ...string) (string, time.Time, error) {
	return k.tickets.IssueWith(binding(call, l), claims{SyncLink: l, Next: next})
}

// Options are what a Handler needs.
type Options struct {
	Owners    Owners
	Links     *Links
	Transfers *tools.SyncTransfers
	Record    func(audit.Entry) error // the audit log's
	Now       func() time.Time
	Log       *slog.Logger
	// PerOwner bounds the steps one member runs at once (DefaultPerOwner); Idle how long a step waits for the
	// member's side to send or take the next byte (DefaultIdle). A stalled or flooding command line holds an
	// upload into a sandbox, so neither can be held without bound.
	PerOwner int
	Idle     time.Duration
	// HoldBody takes one of the server's places for large bodies (server/limits.go) for a step that holds its
	// body whole (a fetch's paths, a new base), so that the members' steps and the tool calls together hold a few
	// such bodies at a time, not one per step; it returns what gives the place back, or answers the request
	// (503) and reports false. The stream of a sync in takes none: it flows through to the sandbox for as long
	// as the upload lasts, and a place held that long would turn away the others' large calls. nil: no places.
	HoldBody func(w http.ResponseWriter, r *http.Request) (release func(), ok bool)
	// HoldBytes takes such a place for size bytes a step is about to hold whole after its ticket is spent (the
	// deletions and manifest at the end of a sync in's stream, the sandbox's manifest a begin answers with, the
	// sandbox's listing past a small one), when they are more than a small body; it returns
	// what gives the place back, or ErrBusy. nil: no places.
	HoldBytes func(ctx context.Context, size int64) (release func(), err error)
}

// ErrBusy is Options.HoldBytes' word that every place stayed held: the step is answered 503.
var ErrBusy = errors.New("the server is holding as many large requests as it can")

// Defaults of Options.
const (
	DefaultPerOwner = 4
	DefaultIdle     = time.Minute
)

// Handler serves Path's steps.
type Handler struct {
	o       Options
	mu      sync.Mutex
	running map[string]int // steps running, by owner
}

// NewHandler makes a Handler.
func NewHandler(o Options) *Handler {
	if o.PerOwner <= 0 {
		o.PerOwner = DefaultPerOwner
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.HoldBody == nil {
		o.HoldBody = func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }
	}
	if o.HoldBytes == nil {
		o.HoldBytes = func(context.Context, int64) (func(), error) { return func() {}, nil }
	}
	return &Handler{o: o, running: map[string]int{}}
}

// enter counts a step of owner in, false when the owner runs PerOwner already; leave counts it out.
func (h *Handler) enter(owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[owner] >= h.o.PerOwner {
		return false
	}
	h.running[owner]++
	return true
}

func (h *Handler) leave(owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[owner]--; h.running[owner] <= 0 {
		delete(h.running, owner)
	}
}

// binding is what a link's ticket is bound to besides its claims: the member and session, and the direction.
func binding(call tools.Caller, l tools.SyncLink) policy.Binding {
	return policy.Binding{Owner: call.Owner, Session: call.Session, Tool: "sync " + l.Direction}
}

// SplitLink parses a link into the address of its steps and its ticket.
func SplitLink(link string) (base, ticket string, err error) {
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment == "" ||
		!strings.HasSuffix(u.Path, Path) {
		return "", "", errors.New("not a sync link of e2b-mcp (http(s)://SERVER/sync#TICKET): copy the whole link the " +
			"tool gave")
	}
	ticket = u.Fragment
	u.Fragment, u.RawFragment, u.RawQuery = "", "", ""
	return u.String(), ticket, nil
}

// refuse answers a request with status and a line of text for the command line to print.
func refuse(w http.ResponseWriter, status int, text string) {
	http.Error(w, text, status)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// A browser marks every request a page makes (Origin on cross-site and POST requests, Sec-Fetch-* on all of
	// them, a preflight before one with a header of its own): the command line sends none of them.
	if r.Method == http.MethodOptions || r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" ||
		r.Header.Get("Sec-Fetch-Mode") != "" {
		refuse(w, http.StatusForbidden, "sync links are for the e2b-mcp command line, not for a browser")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(w, http.StatusMethodNotAllowed, "sync steps are POSTs of the e2b-mcp command line")
		return
	}
	step := strings.TrimPrefix(r.URL.Path, Path+"/")
	owner, ok := h.o.Owners.Owner(w, r)
	if !ok {
		return
	}
	var c claims
	opened, err := h.o.Links.tickets.Open(r.Header.Get(TicketHeader), &c)
	switch {
	case errors.Is(err, tickets.ErrExpired):
		refuse(w, http.StatusGone, "this sync link has expired: ask for a new one (call the sync tool again)")
		return
	case err != nil:
		refuse(w, http.StatusForbidden, "not a sync link of this server")
		return
	case opened.Binding.Owner != owner:
		// Checked before the ticket is spent: another member cannot use up a member's link either.
		h.o.Log.Warn("a sync link was presented by another member", "owner", opened.Binding.Owner, "caller", owner)
		refuse(w, http.StatusForbidden, "this sync link is another member's")
		return
	case !slices.Contains(c.Next, step):
		refuse(w, http.StatusConflict, fmt.Sprintf("this sync link's ticket is not for the step %.32q (an e2b-mcp of "+
			"another version?)", step))
		return
	}
	// Before the ticket is spent: a step refused for now can be sent again.
	if !h.enter(owner) {
		w.Header().Set("Retry-After", "5")
		refuse(w, http.StatusTooManyRequests, fmt.Sprintf("you run %d sync steps at once already: wait for one to end",
			h.o.PerOwner))
		return
	}
	defer h.leave(owner)
	release := func() {}
	if step == stepFetch || step == stepRebase {
		var ok bool
		if release, ok = h.o.HoldBody(w, r); !ok {
			return // before the ticket is spent, as above
		}
		release = sync.OnceFunc(release)
		defer release()
	}
	switch err := h.o.Links.tickets.Spend(opened); {
	case errors.Is(err, tickets.ErrExpired):
		refuse(w, http.StatusGone, "this sync link has expired: ask for a new one (call the sync tool again)")
		return
	case errors.Is(err, tickets.ErrNotThisCalls):
		refuse(w, http.StatusGone, "this sync link was used already: a link works once; ask for a new one")
		return
	case err != nil:
		h.o.Log.Error("a sync link's ticket could not be checked", "error", err)
		refuse(w, http.StatusServiceUnavailable, "the server cannot tell whether this link was used: try again")
		return
	}
	call := tools.Caller{Owner: owner, Session: opened.Binding.Session}
	// Each read of the body and write of the answer has Idle to happen in.
	rc := http.NewResponseController(w)
	r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: h.o.Idle}
	s := &stepRun{h: h, w: &idleWriter{ResponseWriter: w, rc: rc, idle: h.o.Idle}, raw: w, r: r, call: call,
		link: c.SyncLink, step: step, expires: opened.Expires, start: h.o.Now(), release: release}
	s.run()
}

// answerJSON answers v.
func answerJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads a step's body of at most limit bytes into dst (413 past it), grown at once to the length it says
// when that is within limit. One over is read to limit all the same, held no further: the member's command line
// then sees the 413 and its words, not a connection reset under the body it is still sending.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, dst *bytes.Buffer) error {
	if r.ContentLength > 0 && r.ContentLength <= limit {
		dst.Grow(int(r.ContentLength) + bytes.MinRead) // room for the read that finds the end
	}
	_, err := dst.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return err
}

// idleBody is a step's body whose every read has idle to happen in.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle)) // the connection's clock, not the server's
	return b.ReadCloser.Read(p)
}

// idleWriter is a step's answer whose every write has idle to happen in.
type idleWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (w *idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}
