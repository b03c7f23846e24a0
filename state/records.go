package state

import (
	"crypto/cipher"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// maxNameLen bounds owners, session names and IDs (bbolt keys are limited to 32KiB).
const maxNameLen = 1024

// checkName rejects names that cannot be part of a record key in either store.
func checkName(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("state: %s is empty", what)
	case len(v) > maxNameLen:
		return fmt.Errorf("state: %s is longer than %d bytes", what, maxNameLen)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("state: %s contains a NUL byte", what)
	case !utf8.ValidString(v):
		return fmt.Errorf("state: %s is not valid UTF-8", what)
	}
	return nil
}

// The tables of records. Each maps (owner, id) to one JSON record of the matching *V1 type: the same documents
// in both stores, so that the logic that reads and writes them (here and in sessions.go, sandboxes.go,
// checkpoints.go) is written once.
const (
	tableSessions     = "sessions"
	tableSandboxes    = "sandboxes"
	tableCheckpoints  = "checkpoints"
	tableTasks        = "tasks"
	tableReservations = "reservations"
)

// recordTx is one transaction of a store, as the record logic sees it. Records of a write transaction that get
// returns are held until the transaction ends, so a read-modify-write is atomic across processes.
type recordTx interface {
	// get returns the record, or nil when there is none.
	get(table, owner, id string) ([]byte, error)
	put(table, owner, id string, v []byte) error
	// del deletes the record and reports whether there was one.
	del(table, owner, id string) (bool, error)
	// each calls fn for every record of owner ("" for every owner) in (owner, id) order, bytewise.
	each(table, owner string, fn func(owner, id string, v []byte) error) error
	// countBy counts the records of table by the value of their top-level string field ("" where it is
	// absent), reading nothing else of them: no sealed value is opened.
	countBy(table, field string) (map[string]int, error)
	// ensureOwner records owner, created at now, unless it is known.
	ensureOwner(owner string, now time.Time) error
	// holdOwner holds the record of owner (which ensureOwner has made) until the transaction ends, so that
	// decisions over all of an owner's records, by any process, are taken one at a time.
	holdOwner(owner string) error
	owners() ([]string, error)
	// cipher is the AEAD of the data key, checked against the store's key-check value (which a write
	// transaction creates when the store has none yet).
	cipher() (cipher.AEAD, error)
}

// txRunner runs a function in one transaction of a store; an error from fn rolls it back.
type txRunner interface {
	view(fn func(recordTx) error) error
	update(fn func(recordTx) error) error
}

// records is the logic both stores share: the Store methods over a txRunner.
type records struct {
	db          txRunner
	now         func() time.Time
	where       string // the store's Location, for messages
	maxSessions int    // live sessions one owner may have
	steps       *stepBatch
}

func newRecords(db txRunner, opts Options, where string) records {
	r := records{db: db, now: opts.Now, where: where, maxSessions: opts.MaxLiveSessions}
	if r.now == nil {
		r.now = time.Now
	}
	if r.maxSessions <= 0 {
		r.maxSessions = DefaultMaxLiveSessions
	}
	r.steps = &stepBatch{}
	writer := r // the fields writeSteps uses are set by now and never change
	r.steps.write = writer.writeSteps
	return r
}

// storedTime normalises a time for storage and comparison: UTC, no monotonic reading.
func storedTime(t time.Time) time.Time { return t.Round(0).UTC() }

func (s *records) decode(table, owner, id string, v []byte, into any) error {
	if err := json.Unmarshal(v, into); err != nil {
		return damaged(s.where, table, owner, id, err)
	}
	return nil
}

// damaged is the error of a record of the store at where that does not decode.
func damaged(where, table, owner, id string, err error) error {
	return fmt.Errorf("%w: %s: record %q of owner %q in %s is damaged: %v", ErrUnusable, where, id, owner, table, err)
}

func put(tx recordTx, table, owner, id string, rec any) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.put(table, owner, id, v)
}

// ownerV1 is the record of an owner.
type ownerV1 struct {
	Created time.Time `json:"created"`
}

// Owners lists every owner the store has seen, sorted.
func (s *records) Owners() ([]string, error) {
	var out []string
	err := s.db.view(func(tx recordTx) error {
		var err error
		out, err = tx.owners()
		return err
	})
	return out, err
}

// Location names the store in messages.
func (s *records) Location() string { return s.where }
