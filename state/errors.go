package state

import (
	"errors"
	"fmt"
)

// Error is a failure of the database the store is kept in. Its Error names the store for the server's log (the
// URL without its password), and Public says what failed in words a caller may see: without the database's host,
// port, user or name, which are the operator's business.
type Error struct {
	where string
	what  string // what failed, shown to callers
	err   error
}

func (e *Error) Error() string { return fmt.Sprintf("state store %s: %s: %v", e.where, e.what, e.err) }

func (e *Error) Unwrap() error { return e.err }

// Public is what failed, for a caller: "the state store's database ...".
func (e *Error) Public() string { return "the state store's database " + e.what }

// PublicText is err's text as a caller may see it: a failure of the store's database in Public's words, which
// name no address; any other error as it is. Every error of a store that goes to a caller goes through it.
func PublicText(err error) string {
	var se *Error
	if errors.As(err, &se) {
		return se.Public()
	}
	return err.Error()
}
