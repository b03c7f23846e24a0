package policy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// Approvals is the human side of require_approval when the client cannot ask: the
// server records a request and shows its ID; a human runs `e2b-mcp approve ID` in
// another process; the same call (same owner, session, tool and arguments) then runs
// once.
//
// The client only ever sees the random ID, and the ID grants nothing by itself: an
// approval is consumed by the binding of the call, computed by the server, and all
// state is in an ApprovalStorage only the server's operators can write: files only the
// local user can write (directory 0700, files 0600), or for replicas their database.
// Every operation holds the store exclusively and replaces it atomically, so several
// server processes and the approve command share it safely.
type Approvals struct {
	storage ApprovalStorage
	ttl     time.Duration
	now     func() time.Time
	mu      sync.Mutex // orders this instance's goroutines; the flock orders processes
}

// Binding ties an approval to one exact call.
type Binding struct {
	Owner      string `json:"owner"`
	Session    string `json:"session"`
	Tool       string `json:"tool"`
	ArgsDigest string `json:"args_digest"`
}

// Pending is an approval request. The call itself, arguments in full, is kept beside the store until the request
// is used or expires (Show reads it).
type Pending struct {
	ID      string  `json:"id"`
	Binding Binding `json:"binding"`
	// Summary is a one-line account of the call (tool and deciding fields, escaped and cut to fit), for when the
	// call itself cannot be read.
	Summary  string    `json:"summary"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Approved bool      `json:"approved"`
	// Denied: a human refused the call; the next identical call is refused, once, instead of asking again.
	Denied bool `json:"denied,omitempty"`
	// Via is how the human answered (ViaCommand, ViaPage); "" while nobody has.
	Via string `json:"via,omitempty"`
}

// How a human answered a request.
const (
	ViaCommand = "command" // `e2b-mcp approve`, run by whoever can write the server's state
	ViaPage    = "page"    // the server's approval page, in a browser
)

// Answered reports whether a human approved or denied the request.
func (p Pending) Answered() bool { return p.Approved || p.Denied }

var (
	// ErrUnknownApproval: no request has this ID (never issued, already used, or
	// expired long ago).
	ErrUnknownApproval = errors.New("unknown approval ID")
	// ErrApprovalExpired: the request exists but its time is up; the call must be
	// made again to get a new one.
	ErrApprovalExpired = errors.New("approval request expired")
	// ErrAlreadyAnswered: Answer found the request approved or denied already.
	ErrAlreadyAnswered = errors.New("approval request already answered")
)

const (
	approvalsFile = "approvals.json"
	approvalsLock = "approvals.lock"
	// callsDir holds one file per request with its call, arguments in full.
	callsDir     = "approvals.d"
	storeVersion = 1
	// maxOpenPerOwner bounds the requests one owner can have waiting, so that one
	// caller looping over distinct calls cannot fill the queue for everyone; and
	// maxOpenRequests bounds the store as a whole.
	maxOpenPerOwner = 20
	maxOpenRequests = 1000
	// summaryBytes bounds Pending.Summary.
	summaryBytes = 300
	idLength     = 10
	// idAlphabet is Crockford's base32: no i, l, o or u, so an ID read aloud or
	// typed from a screen survives; Approve folds the look-alikes back.
	idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"
)

type approvalStore struct {
	Version  int       `json:"version"`
	Requests []Pending `json:"requests"`
}

// BindingFor binds a call. The digest is the sha256 of the arguments' canonical JSON
// (keys sorted, numbers as JSON decoding yields them), so the same arguments bind the
// same way whatever order or number form a client sends them in.
func BindingFor(owner, session, tool string, args map[string]any) Binding {
	sum := sha256.Sum256(canonicalJSON(args))
	return Binding{Owner: owner, Session: session, Tool: tool, ArgsDigest: hex.EncodeToString(sum[:])}
}

func canonicalJSON(args map[string]any) []byte {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err == nil {
		// A round trip through any folds json.Number, ints and floats to one form.
		var v any
		if err = json.Unmarshal(raw, &v); err == nil {
			if canon, err := json.Marshal(v); err == nil {
				return canon
			}
		}
	}
	// Not JSON-encodable (it did not come from a client then). The prefix keeps it
	// apart from every JSON text.
	return []byte(fmt.Sprintf("unencodable:%#v", args))
}

// OpenApprovals opens (creating) the store in dir. Requests expire ttl after they are
// made, and an approval must be used within ttl after it is granted. now is the clock
// (nil: time.Now).
func OpenApprovals(dir string, ttl time.Duration, now func() time.Time) (*Approvals, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return OpenApprovalsIn(fileStorage{dir: dir}, ttl, now)
}

// OpenApprovalsIn opens the approvals kept in storage, as OpenApprovals does.
func OpenApprovalsIn(storage ApprovalStorage, ttl time.Duration, now func() time.Time) (*Approvals, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("approvals: ttl must be positive, got %v", ttl)
	}
	if now == nil {
		now = time.Now
	}
	a := &Approvals{storage: storage, ttl: ttl, now: now}
	// Fail now, not on the first tool call, if the store is unusable.
	if err := a.with(false, func(*approvalStore, time.Time) bool { return false }); err != nil {
		return nil, err
	}
	return a, nil
}

// Request records that call c, bound by b, needs approval and returns the request to
// show the human. An open request for the same binding is reused, so a client
// retrying before the human acts does not pile up IDs. An owner has at most
// maxOpenPerOwner requests waiting.
func (a *Approvals) Request(b Binding, c Call) (Pending, error) {
	var out Pending
	var err error
	werr := a.with(true, func(s *approvalStore, now time.Time) bool {
		open, mine := 0, 0
		for _, p := range s.Requests {
			if now.Before(p.Expires) {
				if p.Binding == b {
					out = p
					return false
				}
				open++
				if p.Binding.Owner == b.Owner {
					mine++
				}
			}
		}
		switch {
		case mine >= maxOpenPerOwner:
			err = fmt.Errorf("approvals: %d requests of yours are already waiting for a human; have them approved or "+
				"let them expire first", mine)
			return false
		case open >= maxOpenRequests:
			err = fmt.Errorf("approvals: %d requests are already waiting; approve or let them expire first", open)
			return false
		}
		var id string
		for {
			if id, err = newID(); err != nil {
				return false
			}
			if !slices.ContainsFunc(s.Requests, func(p Pending) bool { return p.ID == id }) {
				break
			}
		}
		if err = a.saveCall(id, c); err != nil {
			return false
		}
		out = Pending{ID: id, Binding: b, Summary: Summarize(c, summaryBytes), Created: now, Expires: now.Add(a.ttl)}
		s.Requests = append(s.Requests, out)
		return true
	})
	if werr != nil {
		return Pending{}, werr
	}
	if err != nil {
		return Pending{}, err
	}
	return out, nil
}

// Summarize is a one-line account of a call for a human: the tool and its deciding
// fields (DecidingFields), escaped, in about n bytes, the tail of a long value kept.
func Summarize(c Call, n int) string {
	var b strings.Builder
	b.WriteString(c.Tool)
	for _, f := range DecidingFields(c) {
		fmt.Fprintf(&b, " %s=%s", f.Name, display.Readable(f.Value, n))
	}
	return display.Readable(b.String(), n)
}

// Show returns a request, approved or not, with its call as it was made. ok is
// false when the call cannot be read (a request made by an older version, say).
func (a *Approvals) Show(id string) (p Pending, c Call, ok bool, err error) {
	want, valid := normalizeID(id)
	if !valid {
		return Pending{}, Call{}, false, fmt.Errorf("%w: %q is not an approval ID (%d letters and digits)",
			ErrUnknownApproval, clipForDisplay(id), idLength)
	}
	found := false
	err = a.with(false, func(s *approvalStore, now time.Time) bool {
		for _, r := range s.Requests {
			if subtle.ConstantTimeCompare([]byte(r.ID), []byte(want)) == 1 && now.Before(r.Expires) {
				p, found = r, true
				c, ok = a.loadCall(r.ID)
			}
		}
		return false
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no request %s waiting (it may have been used, or expired)", ErrUnknownApproval, want)
	}
	return p, c, ok, err
}

// storedCall is the file kept per request in callsDir.
type storedCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// saveCall keeps a request's call (the caller holds the store).
func (a *Approvals) saveCall(id string, c Call) error {
	data, err := json.Marshal(storedCall{Tool: c.Tool, Args: canonicalJSON(c.Args)})
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	return a.storage.SaveCall(id, data)
}

func (a *Approvals) loadCall(id string) (Call, bool) {
	data, err := a.storage.LoadCall(id)
	if err != nil {
		return Call{}, false
	}
	var sc storedCall
	if json.Unmarshal(data, &sc) != nil {
		return Call{}, false
	}
	c := Call{Tool: sc.Tool}
	if json.Unmarshal(sc.Args, &c.Args) != nil {
		return Call{}, false
	}
	return c, true
}

// Approve grants a request: the human action, by `e2b-mcp approve`. The approval is then good for one call
// within ttl. Approving an approved request again is harmless, and it overrides a denial.
func (a *Approvals) Approve(id string) (Pending, error) {
	return a.answer(id, true, ViaCommand, false)
}

// Deny refuses a request, by `e2b-mcp approve deny`: the next identical call within ttl is refused, once.
func (a *Approvals) Deny(id string) (Pending, error) {
	return a.answer(id, false, ViaCommand, false)
}

// Answer approves or denies a request that nobody has answered yet (ErrAlreadyAnswered otherwise): the approval
// page's answer, which counts once.
func (a *Approvals) Answer(id string, approve bool, via string) (Pending, error) {
	return a.answer(id, approve, via, true)
}

func (a *Approvals) answer(id string, approve bool, via string, once bool) (Pending, error) {
	want, ok := normalizeID(id)
	if !ok {
		return Pending{}, fmt.Errorf("%w: %q is not an approval ID (%d letters and digits)", ErrUnknownApproval,
			clipForDisplay(id), idLength)
	}
	var out Pending
	var err error
	werr := a.with(true, func(s *approvalStore, now time.Time) bool {
		for i := range s.Requests {
			p := &s.Requests[i]
			if subtle.ConstantTimeCompare([]byte(p.ID), []byte(want)) != 1 {
				continue
			}
			switch {
			case !now.Before(p.Expires):
				err = fmt.Errorf("%w: %s expired at %s; make the call again to get a new request",
					ErrApprovalExpired, p.ID, p.Expires.Format(time.RFC3339))
				return false
			case once && p.Answered():
				err = fmt.Errorf("%w: %s", ErrAlreadyAnswered, p.ID)
				return false
			}
			p.Approved, p.Denied, p.Via = approve, !approve, via
			p.Expires = now.Add(a.ttl)
			out = *p
			return true
		}
		err = fmt.Errorf("%w: no request %s (it may have been used, or expired)", ErrUnknownApproval, want)
		return false
	})
	if werr != nil {
		return Pending{}, werr
	}
	if err != nil {
		return Pending{}, err
	}
	return out, nil
}

// List returns the requests not yet expired, approved or not, oldest first.
func (a *Approvals) List() ([]Pending, error) {
	var out []Pending
	err := a.with(false, func(s *approvalStore, now time.Time) bool {
		for _, p := range s.Requests {
			if now.Before(p.Expires) {
				out = append(out, p)
			}
		}
		return false
	})
	slices.SortStableFunc(out, func(x, y Pending) int { return x.Created.Compare(y.Created) })
	return out, err
}

// Consume returns the answered (approved or denied), unexpired request that matches the binding, and deletes
// it: an approval runs exactly one call, and a denial refuses one. found is false when no human has answered a
// request for the call.
func (a *Approvals) Consume(b Binding) (p Pending, found bool, err error) {
	err = a.with(true, func(s *approvalStore, now time.Time) bool {
		for i, r := range s.Requests {
			if r.Answered() && now.Before(r.Expires) && r.Binding == b {
				s.Requests = slices.Delete(s.Requests, i, i+1)
				p, found = r, true
				return true
			}
		}
		return false
	})
	if err != nil {
		return Pending{}, false, err
	}
	return p, found, nil
}

// with runs fn on the store while the storage holds it. With write set the hold is
// exclusive, expired requests are dropped, and the store is saved if anything changed,
// the calls of requests no longer in it dropped.
func (a *Approvals) with(write bool, fn func(s *approvalStore, now time.Time) (changed bool)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.storage.Update(write, func(doc []byte) ([]byte, error) {
		s, err := a.decode(doc)
		if err != nil {
			return nil, err
		}
		now := a.now()
		pruned := false
		if write {
			pruned = s.prune(now, a.ttl)
		}
		changed := fn(s, now)
		if !write || !(changed || pruned) {
			return nil, nil
		}
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
		keep := make([]string, len(s.Requests))
		for i, p := range s.Requests {
			keep[i] = p.ID
		}
		a.storage.DropCalls(keep)
		return append(data, '\n'), nil
	})
}

// prune drops requests expired more than ttl ago. Recently expired ones are kept so
// that Approve can say "expired" rather than "unknown".
func (s *approvalStore) prune(now time.Time, ttl time.Duration) bool {
	n := len(s.Requests)
	s.Requests = slices.DeleteFunc(s.Requests, func(p Pending) bool {
		return !now.Before(p.Expires.Add(ttl))
	})
	return len(s.Requests) != n
}

// decode reads the stored document; nil is a store with no requests yet.
func (a *Approvals) decode(data []byte) (*approvalStore, error) {
	if data == nil {
		return &approvalStore{Version: storeVersion}, nil
	}
	var s approvalStore
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("approvals: %s is corrupt (%v); delete it to start over", a.storage.Location(), err)
	}
	if s.Version != storeVersion {
		return nil, fmt.Errorf("approvals: %s has version %d, this program reads version %d", a.storage.Location(),
			s.Version, storeVersion)
	}
	return &s, nil
}

// newID returns idLength characters of idAlphabet from crypto/rand (50 bits). The
// ID is a name for the human, not a secret: the call's binding is what is approved.
func newID() (string, error) {
	var raw [idLength]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("approvals: random ID: %w", err)
	}
	var b strings.Builder
	for _, r := range raw {
		b.WriteByte(idAlphabet[r&31]) // 256 is a multiple of 32: no bias
	}
	return b.String(), nil
}

// normalizeID accepts an ID as a human may type it: any case, with spaces or dashes,
// and the look-alike letters i, l, o.
func normalizeID(id string) (string, bool) {
	var b bytes.Buffer
	for _, r := range strings.ToLower(id) {
		switch {
		case r == ' ' || r == '-' || r == '\t' || r == '\n' || r == '\r':
			continue
		case r == 'i' || r == 'l':
			r = '1'
		case r == 'o':
			r = '0'
		}
		if r > 0x7f || !strings.ContainsRune(idAlphabet, r) {
			return "", false
		}
		b.WriteRune(r)
	}
	if b.Len() != idLength {
		return "", false
	}
	return b.String(), true
}
