package server

import (
	"bytes"
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
)

// httpLimits are the bounds of one server's HTTP requests.
type httpLimits struct {
	maxBody                        int64
	readHeader, readBody, idleConn time.Duration
}

// newHTTPLimits fits the body limit to the largest legitimate call: an e2b_write_file of the write limit, whose
// content JSON may escape to twice its size (newlines, quotes, backslashes), plus the rest of the request.
func newHTTPLimits(c tools.Config) httpLimits {
	write := c.WriteLimitBytes
	if write <= 0 {
		write = tools.DefaultWriteLimitBytes
	}
	return httpLimits{
		maxBody:    2*int64(write) + bodyOverhead,
		readHeader: readHeaderTimeout,
		readBody:   bodyReadTimeout,
		idleConn:   idleTimeout,
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
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, l.maxBody))
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

func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("request body too large: at most %d bytes", limit), http.StatusRequestEntityTooLarge)
}
