// Package state is e2b-mcp's memory: owners, sessions with their leases, sandbox records and checkpoints, so that
// a restarted server finds every sandbox it made. Two stores keep it behind one interface, Store: Bolt, one
// embedded bbolt file in the state directory (the default), and Postgres, a PostgreSQL database that several
// server processes (replicas behind a load balancer) share. Both seal envd access tokens the same way, migrate
// their schema when they are opened, and pass the same test suite.
//
// # Secrets
//
// envd access tokens are sealed with AES-256-GCM under a 32-byte data key from a KeySource (the OS keyring in
// production). Each sealed value has its own random nonce and the record's key as additional data, so a
// ciphertext cannot be moved to another record. A sealed check value kept with the records tells a wrong data
// key apart from a damaged record.
package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Store is what the server remembers. Every method is safe for concurrent use, and every acknowledged write is
// durable.
type Store interface {
	// TouchSession creates the owner and session if needed and renews the lease to Now()+lease; clears Lapsed. A
	// session it would create while its owner has MaxLiveSessions live ones is refused (ErrTooManySessions); an
	// existing one, live or lapsed, is always renewed. The bound holds across processes sharing the store.
	TouchSession(owner, name string, lease time.Duration) (Session, error)
	// Sessions lists every session of every owner, sorted by owner then name.
	Sessions() ([]Session, error)
	// LapsedSessions lists the sessions whose LeaseExpires is before now and that are not yet marked Lapsed.
	LapsedSessions(now time.Time) ([]Session, error)
	// ClaimLapsedSession makes this caller the one that applies the orphan action to a lapsed session, for hold
	// from now: it reports false when the session is no longer lapsed-and-unmarked, or another caller's claim
	// has not run out yet. Processes sharing the store sweep each orphan once this way; a claim whose holder
	// died runs out and the session is swept again.
	ClaimLapsedSession(owner, name string, now time.Time, hold time.Duration) (bool, error)
	// ReleaseSessionClaim gives up a claim (after a failed sweep), so that the next sweep tries again at once.
	ReleaseSessionClaim(owner, name string) error
	// MarkSessionLapsed records that the orphan action has been applied (and ends any claim); the next
	// TouchSession clears it. A session whose lease runs past Now() (renewed while it was swept) is left as it
	// is. ErrNotFound if there is no such session.
	MarkSessionLapsed(owner, name string) error

	// PutSandbox inserts or replaces the record keyed by (Owner, ID), recording the owner if new. A zero Created
	// is stored as Now().
	PutSandbox(r SandboxRecord) error
	// Sandbox returns one record; ErrNotFound if absent or of another owner.
	Sandbox(owner, id string) (SandboxRecord, error)
	// SessionSandboxes returns the owner's sandboxes in session, sorted by Created (then ID).
	SessionSandboxes(owner, session string) ([]SandboxRecord, error)
	// AllSandboxes returns every owner's records, sorted by owner, then Created, then ID.
	AllSandboxes() ([]SandboxRecord, error)
	// SandboxesByState counts every owner's sandboxes by state. It opens no envd token (the data key is not
	// needed), so a metrics scrape may call it.
	SandboxesByState() (map[string]int, error)
	// UpdateSandbox runs fn on the record as one atomic read-modify-write (across processes too). If fn returns
	// an error nothing is written and that error is returned; a panic in fn is re-raised after nothing was
	// written. fn must not change Owner or ID, and may run more than once, each time on the record as then read
	// (a PostgreSQL store makes a transaction again when the database dropped its connection): it only changes
	// the record.
	UpdateSandbox(owner, id string, fn func(*SandboxRecord) error) (SandboxRecord, error)
	// CountStep adds one step to the sandbox's count and returns the record after it. The step is written with
	// the next batch, within a second (a crash loses the steps of that second), unless exact says the caller acts
	// on the count: then it is written at once, with any steps still pending.
	CountStep(owner, id string, exact func(SandboxRecord) bool) (SandboxRecord, error)
	// DeleteSandbox removes the record; ErrNotFound if absent. The sandbox's checkpoints are kept.
	DeleteSandbox(owner, id string) error

	// PutCheckpoint inserts or replaces the checkpoint keyed by (Owner, ID). A zero Created is stored as Now().
	PutCheckpoint(c Checkpoint) error
	// Checkpoint returns one checkpoint; ErrNotFound if absent or of another owner.
	Checkpoint(owner, id string) (Checkpoint, error)
	// SessionCheckpoints returns the owner's checkpoints in session, of sandboxID or of all sandboxes when
	// sandboxID is "", sorted by Created (then ID).
	SessionCheckpoints(owner, session, sandboxID string) ([]Checkpoint, error)
	// DeleteCheckpoint removes the checkpoint record; ErrNotFound if absent.
	DeleteCheckpoint(owner, id string) error

	// PutTask inserts or replaces the task keyed by (Owner, ID), and deletes the owner's expired tasks.
	PutTask(t Task) error
	// Task returns one task; ErrNotFound if absent or of another owner.
	Task(owner, id string) (Task, error)
	// UpdateTask runs fn on the task as one atomic read-modify-write (across processes too), as UpdateSandbox
	// does; ErrNotFound if there is no such task.
	UpdateTask(owner, id string, fn func(*Task) error) (Task, error)

	// ReserveSandboxes holds n places of kind in owner's caps for hold, or refuses with a *CapError when the
	// owner's running and paused sandboxes and held places leave no room; count and reservation are one
	// transaction, so racing calls of any process sharing the store never pass a cap together.
	ReserveSandboxes(owner string, kind SlotKind, n int, caps SandboxCaps, hold time.Duration) (Reservation, error)
	// PutReservedSandbox stores a new sandbox's record and takes one place off the reservation it was made under,
	// in one transaction, so that the sandbox is never counted twice.
	PutReservedSandbox(res Reservation, r SandboxRecord) error
	// UpdateReservedSandbox is UpdateSandbox that takes one place off the reservation in the same transaction: a
	// resume's record counts as running from then on instead of its place, never both and never neither.
	UpdateReservedSandbox(res Reservation, owner, id string, fn func(*SandboxRecord) error) (SandboxRecord, error)
	// ReleaseReservation gives a reservation's places back (once its sandboxes are recorded, or failed).
	ReleaseReservation(r Reservation) error
	// SandboxUse reports owner's live and running sandboxes, held places included.
	SandboxUse(owner string) (live, running int, err error)

	// Usage returns the running time (as E2B bills it: from create or resume to pause or end), the sandboxes
	// created and the peak running of owner ("" for every owner), per day (UTC) from since's day to today,
	// sorted by owner then day; sandboxes running now count up to now.
	Usage(owner string, since time.Time) ([]UsageDay, error)

	// Owners lists every owner the store has seen, sorted.
	Owners() ([]string, error)
	// Ping reports whether the store can be used now: nil, or why not (ErrClosed, a file that cannot be opened, a
	// database that does not answer before ctx ends). It writes nothing.
	Ping(ctx context.Context) error
	// Location names the store in messages: the file's path, or the database URL without its password.
	Location() string
	// Close releases the store; later operations return ErrClosed.
	Close() error
}

var (
	_ Store = (*Bolt)(nil)
	_ Store = (*Postgres)(nil)
)

var (
	// ErrNotFound is wrapped by lookups of records that do not exist (or belong to another owner).
	ErrNotFound = errors.New("not found")
	// ErrBusy matches (errors.Is) the error when another process held the store for longer than the lock timeout.
	ErrBusy = errors.New("state store is busy")
	// ErrUnusable is wrapped when the store is damaged, foreign or from a newer e2b-mcp. It is left as it is.
	ErrUnusable = errors.New("unusable state store")
	// ErrInUse is wrapped when an exclusive open (Options.Exclusive) finds the store open in another process.
	ErrInUse = errors.New("state store is in use by another process")
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("state store is closed")
	// ErrTooManySessions is wrapped by TouchSession when a new session would take its owner past MaxLiveSessions.
	ErrTooManySessions = errors.New("too many live sessions")
)

// busyError reads "state store <where> is busy: <why>" and matches ErrBusy.
type busyError struct{ where, why string }

func (e busyError) Error() string { return fmt.Sprintf("state store %s is busy: %s", e.where, e.why) }

func (e busyError) Is(target error) bool { return target == ErrBusy }

// Options configure a Store.
type Options struct {
	Keys KeySource        // required: the data key that seals envd access tokens
	Now  func() time.Time // default time.Now
	// LockTimeout bounds the wait for another process: its lock on the bbolt file, or a PostgreSQL operation
	// (connection, locks and query together); default DefaultLockTimeout.
	LockTimeout time.Duration
	// RedialFor is how long an operation of a PostgreSQL store is tried again while the database cannot be
	// reached or drops its connections (a restart, a failover); default DefaultRedialFor, negative for never.
	RedialFor time.Duration
	// MaxLiveSessions bounds the sessions one owner may have live at once (lease running, and a running or paused
	// sandbox held or a call within IdleSessionAfter: see liveSessions); default DefaultMaxLiveSessions. A caller
	// may name any session, and each is a durable record.
	MaxLiveSessions int
	// Exclusive opens the embedded store only when no other process has it open (ErrInUse otherwise), and keeps
	// every other process from opening it until Close: for a data key rotation (every process that has the
	// file open holds a shared lock on state.users beside it until it closes the store). Not for Postgres.
	Exclusive bool
}

// IsPostgresURL reports whether where names a PostgreSQL database rather than a directory.
func IsPostgresURL(where string) bool {
	return strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://")
}

// OpenAt opens the store at where: a PostgreSQL URL (see IsPostgresURL), or a state directory for the embedded
// store.
func OpenAt(where string, opts Options) (Store, error) {
	// A nil *Bolt or *Postgres must not become a non-nil Store.
	if IsPostgresURL(where) {
		pg, err := OpenPostgres(where, opts)
		if err != nil {
			return nil, err
		}
		return pg, nil
	}
	b, err := Open(where, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}
