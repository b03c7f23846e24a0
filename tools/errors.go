package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// What a model reads when a call fails: its own mistakes and refusals as written (toolError), and every other
// failure worded by where it happened (E2B, the state store, this server's disk), never with a secret.

// toolError is a mistake or a refusal the model can read and correct: its text is the whole tool result.
type toolError struct{ text string }

func (e *toolError) Error() string { return e.text }

// userErrorf words a toolError. An argument that is a failure of the state store is shown as what failed, without
// the database's address (see state.Error).
func userErrorf(format string, args ...any) error {
	for i, a := range args {
		var stored *state.Error
		if err, ok := a.(error); ok && errors.As(err, &stored) {
			args[i] = stored.Public()
		}
	}
	return &toolError{text: fmt.Sprintf(format, args...)}
}

// ConnectionRequired is the answer of every tool when the owner has no E2B key (the server names its connect
// page instead where it has one).
func ConnectionRequired(owner string) string {
	return "No E2B API key is connected for " + owner + ". Run `e2b-mcp auth login` in a terminal " +
		"(or use --backend local to try the server without an account), then call this tool again."
}

// errorText words err for the model.
func (b *base) errorText(ctx context.Context, call Caller, tool string, err error) string {
	var te *toolError
	var ae *e2b.APIError
	var ce *e2b.Error
	var ue *url.Error
	var ne net.Error
	var se *state.Error
	switch {
	case errors.As(err, &te):
		return te.text
	case errors.As(err, &se):
		// Ahead of the network cases: the database is reached over the network too, and is not E2B.
		b.log.Error("the state store failed", "tool", tool, "owner", call.Owner, "session", call.Session, "err", err)
		return "e2b-mcp's state store failed (on this server's side): " + se.Public() + ". Call again in a moment."
	case errors.Is(err, ErrNoAPIKey):
		return ConnectionRequired(call.Owner)
	case errors.As(err, &ae):
		return ae.Error()
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return "The call was cancelled before it finished."
	case localFailure(err):
		// Ahead of the network cases: a *fs.PathError passes for a net.Error (it has Timeout and Temporary).
		return "e2b-mcp's state store failed (on this server, not at E2B): " + err.Error()
	case errors.As(err, &ue):
		// The URL's query could carry a signed /files parameter; the path names the operation well enough.
		u := ue.URL
		if p, perr := url.Parse(u); perr == nil {
			p.RawQuery = ""
			u = p.String()
		}
		return fmt.Sprintf("E2B API error (no answer from %s: %s): %v", ue.Op, u, ue.Err)
	case errors.As(err, &ne):
		return "E2B API error (no answer from E2B): " + err.Error()
	case errors.As(err, &ce):
		// The E2B client's own failures (no answer, a cut stream, an answer it cannot read, a request it would not
		// make) carry no status. The whole text is kept: what wraps the failure says what it was part of.
		return "E2B API error (no usable answer from E2B): " + strings.TrimPrefix(err.Error(), "e2b: ")
	}
	b.log.Error("tool failed", "tool", tool, "owner", call.Owner, "session", call.Session, "err", err)
	return "Internal error in " + tool + ": " + err.Error()
}

// localFailure tells a failure of this server's own storage (its state store, a full or read-only disk) from one
// of E2B, so that neither is blamed for the other.
func localFailure(err error) bool {
	return errors.Is(err, state.ErrBusy) || errors.Is(err, state.ErrUnusable) || errors.Is(err, state.ErrClosed) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, syscall.EIO)
}
