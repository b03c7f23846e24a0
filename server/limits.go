package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Limits of HTTP requests, so that no client can make the server hold unbounded memory or a connection forever.
const (
	// readHeaderTimeout bounds the time a client takes to send a request's headers.
	readHeaderTimeout = 15 * time.Second
	// bodyReadTimeout bounds the time a client takes to send a request's body (the largest, at 1 MB/s, in time).
	bodyReadTimeout = 2 * time.Minute
	// idleTimeout closes a kept-alive connection that sends no new request.
	idleTimeout = 2 * time.Minute
	// bodyOverhead is what a request adds to the content it carries: JSON-RPC framing and the other arguments.
	bodyOverhead = 1 << 20
	// smallBody is the size up to which a body is read at once; larger ones (and those of unknown length) take
	// one of largeBodies places, so that many at once cannot add up to more memory than a few.
	smallBody   = 1 << 20
	largeBodies = 4
)

// httpLimits are the bounds of one server's HTTP requests.
type httpLimits struct {
	maxBody                        int64
	readHeader, readBody, idleConn time.Duration
	large                          chan struct{} // a place per large body being read or handled
	// placeTimeout is when a body waiting for a place gives up (time.After; a test's, to see the wait and end it).
	placeTimeout func(time.Duration) <-chan time.Time
}

// newHTTPLimits fits the body limit to the largest legitimate call: an e2b_write_file of the write limit, whose
// content JSON may escape to twice its size (newlines, quotes, backslashes), plus the rest of the request.
func newHTTPLimits(c tools.Config) httpLimits {
	write := c.WriteLimitBytes
	if write <= 0 {
		write = tools.DefaultWriteLimitBytes
	}
	return httpLimits{
		maxBody:      2*int64(write) + bodyOverhead,
		readHeader:   readHeaderTimeout,
		readBody:     bodyReadTimeout,
		idleConn:     idleTimeout,
		large:        make(chan struct{}, largeBodies),
		placeTimeout: time.After,
	}
}

// limitBody reads a request's whole body before the transports see it: at most maxBody bytes (413 beyond, before
// reading anything when Content-Length says so), within readBody (the connection is cut when a client sends too
// slowly). net/http lifts the read deadline once the body is read to its end, so a call's answer may stream for
// much longer (TestHTTPBodyDeadlineLifted holds it to that).
func (l httpLimits) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > l.maxBody {
			tooLarge(w, l.maxBody)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(l.readBody))
		// Held until the call is handled: the transports keep copies of the body meanwhile.
		release, ok := l.holdBody(w, r)
		if !ok {
			return
		}
		defer release()
		body, err := readBody(http.MaxBytesReader(w, r.Body, l.maxBody), r.ContentLength)
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			tooLarge(w, l.maxBody)
			return
		case err != nil:
			// Too slow or cut: the connection is not read again (the deadline stays).
			w.Header().Set("Connection", "close")
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// holdBody takes a place for r's body when it is large (or of unknown length), to hold while its handler holds the
// body, and returns what gives it back; or answers r and reports false (takePlace).
func (l httpLimits) holdBody(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	if r.ContentLength >= 0 && r.ContentLength <= smallBody {
		return func() {}, true
	}
	if !l.takePlace(w, r) {
		return nil, false
	}
	return func() { <-l.large }, true
}

// takePlace takes a place for r's large body, or answers r and reports false (503 when it waits too long, placeFor).
func (l httpLimits) takePlace(w http.ResponseWriter, r *http.Request) bool {
	if l.waitPlace(r.Context()) {
		return true
	}
	if r.Context().Err() == nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "busy reading other large requests; try again", http.StatusServiceUnavailable)
	}
	return false
}

// placeFor takes a place for size bytes a handler is about to hold whole when they are more than a small body
// (the answer of a sandbox, the end of a stream), and returns what gives it back; false when none was free in time.
func (l httpLimits) placeFor(ctx context.Context, size int64) (release func(), ok bool) {
	if size <= smallBody {
		return func() {}, true
	}
	if !l.waitPlace(ctx) {
		return nil, false
	}
	return func() { <-l.large }, true
}

// waitPlace takes a place, false when ctx ends first or every place stays held for half a body's read time, so
// that a body is turned away (503) before the slow ones holding the places are cut off.
func (l httpLimits) waitPlace(ctx context.Context) bool {
	select {
	case l.large <- struct{}{}:
		return true
	default:
	}
	select {
	case l.large <- struct{}{}:
		return true
	case <-l.placeTimeout(l.readBody / 2):
		return false
	case <-ctx.Done():
		return false
	}
}

// readBody reads a whole body, into a buffer of its size when its length is known (no growing and copying).
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length < 0 {
		return io.ReadAll(r)
	}
	buf := make([]byte, length)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	// Read on to the body's end (net/http enforces Content-Length, so there is nothing more): only then does
	// net/http lift the read deadline and watch the connection for the client going away.
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading past the body's length: %v", err)
	}
	return buf, nil
}

func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("request body too large: at most %d bytes", limit), http.StatusRequestEntityTooLarge)
}
