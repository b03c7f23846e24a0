package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel errors that an *APIError matches with errors.Is, so callers need not know status codes.
var (
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrUnauthorized = errors.New("unauthorized")
	ErrRateLimited  = errors.New("rate limited")
	// ErrSandboxGone: the edge proxy answered 502 "The sandbox was not found": the sandbox is paused, was killed,
	// or timed out, so envd cannot be reached until it is resumed (if it still exists).
	ErrSandboxGone = errors.New("sandbox is not running")
	// ErrInvalidArgument matches HTTP 400 and Connect's invalid_argument.
	ErrInvalidArgument = errors.New("invalid argument")
)

// Kinds of the client's own failures (an *Error), for errors.Is. A call that its context ended keeps the
// context's kind: context.Canceled, or context.DeadlineExceeded, which matches ErrTimeout too.
var (
	// ErrNoAnswer: no answer came from E2B or envd: the connection could not be made or failed before an answer,
	// or the answer did not start within Config.RequestTimeout.
	ErrNoAnswer = errors.New("no answer")
	// ErrTimeout: the call ran out of time: no answer within Config.RequestTimeout (which is ErrNoAnswer as
	// well), or its context's deadline passed.
	ErrTimeout = errors.New("timed out")
	// ErrStreamCut: a stream that had started ended early: the connection closed before Connect's end-of-stream
	// message, or the process stream ended without the process's end event.
	ErrStreamCut = errors.New("stream cut")
	// ErrBadAnswer: E2B or envd answered, but not as the protocol says (malformed or oversized, of the wrong
	// content type, a page token repeated).
	ErrBadAnswer = errors.New("unexpected answer")
)

// Error is a failure of a call other than an error answer of E2B's (that is an *APIError): the request could not
// be made (ErrInvalidArgument, or ErrUnauthorized without a key), no usable answer came (ErrNoAnswer, ErrTimeout,
// ErrStreamCut, ErrBadAnswer), or the call's context ended. Its text never holds the API key or a token.
type Error struct {
	// Op names the call in words, as APIError.Op does; empty for a failure that is not of one call.
	Op string
	// Kind is one of the kinds above, ErrInvalidArgument, ErrUnauthorized, context.Canceled or
	// context.DeadlineExceeded; errors.Is matches it.
	Kind error

	msg string // the failure in words, secrets removed
	err error  // what caused it, when something did
}

func (e *Error) Error() string {
	if e.Op == "" {
		return "e2b: " + e.msg
	}
	return "e2b: " + e.Op + ": " + e.msg
}

// Unwrap gives errors.Is and errors.As the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.err}
}

// Is matches the kinds that another kind implies: a request timeout is no answer, and a context's deadline a
// timeout.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoAnswer:
		return e.Kind == ErrTimeout
	case ErrTimeout:
		return e.Kind == context.DeadlineExceeded
	}
	return false
}

// errorf makes an *Error of op and kind, its message formatted as by fmt.Errorf, whose %w (one at most) becomes
// the cause.
func errorf(op string, kind error, format string, args ...any) *Error {
	w := fmt.Errorf(format, args...)
	return &Error{Op: op, Kind: kind, msg: w.Error(), err: errors.Unwrap(w)}
}

// contextError is a call that its context ended, with err (context.Canceled or context.DeadlineExceeded).
func contextError(op string, err error) *Error {
	return &Error{Op: op, Kind: err, msg: err.Error()}
}

// APIError is every error E2B answers with, from either plane.
type APIError struct {
	// Op names the call in words, e.g. "create sandbox" or "envd Start".
	Op string
	// Status is the HTTP status. For a Connect error carried inside a 200 stream it is the status that Connect
	// maps the code to (not_found → 404, ...).
	Status int
	// Code is envd's Connect code ("not_found", "invalid_argument", ...) or, on the control plane, E2B's
	// optional error_code ("sandbox_capacity_unavailable", ...). Empty when E2B sent none.
	Code string
	// Message is E2B's own words.
	Message string
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
	// SandboxID is the sandbox the call was about, when there is one.
	SandboxID string

	// controlPlane marks answers of the control plane, where a 502 is a proxy's failure and says nothing about
	// whether the sandbox runs (on envd's side, the edge's 502 means exactly that).
	controlPlane bool
	// fromE2B marks an answer in E2B's own error shape ({code, message}), as against a bare 404 of a route
	// the server does not have.
	fromE2B bool
}

func (e *APIError) Error() string {
	msg := clipMiddle(e.Message, maxMessage)
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Status == http.StatusBadGateway && e.SandboxID != "" && e.Code == "" && !e.controlPlane {
		return fmt.Sprintf("E2B API error (%s: %d): sandbox %s is not running (paused, killed or timed out): %s", e.Op,
			e.Status, e.SandboxID, msg)
	}
	if e.Code != "" {
		return fmt.Sprintf("E2B API error (%s: %d %s): %s", e.Op, e.Status, e.Code, msg)
	}
	return fmt.Sprintf("E2B API error (%s: %d): %s", e.Op, e.Status, msg)
}

// maxMessage bounds the E2B message an error's text carries: envd repeats a command it could not start, however
// long, and the reason comes last ("argument list too long"), so the middle of a longer message is left out.
const maxMessage = 2048

// clipMiddle shortens s to about max bytes, keeping its head and tail (whole UTF-8 characters) around a note of
// how much was left out.
func clipMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max*3/4, len(s)-max/4
	for head > 0 && !utf8Start(s[head]) {
		head--
	}
	for tail < len(s) && !utf8Start(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s … [%d bytes left out] … %s", s[:head], tail-head, s[tail:])
}

// Is lets callers test the kind of failure with errors.Is(err, ErrNotFound) and friends.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.Code == "not_found"
	case ErrConflict:
		return e.Status == http.StatusConflict || e.Code == "already_exists"
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Code == "unauthenticated" ||
			e.Code == "permission_denied"
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests || e.Code == "resource_exhausted"
	case ErrSandboxGone:
		return e.Status == http.StatusBadGateway && e.Code == "" && !e.controlPlane || e.Code == "unavailable"
	case ErrInvalidArgument:
		return e.Status == http.StatusBadRequest || e.Code == "invalid_argument"
	}
	return false
}
