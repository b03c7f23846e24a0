package e2btest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RecordedRequest is one request as the emulator received it, for assertions on the wire format.
type RecordedRequest struct {
	// Time is when the request arrived, on the real clock (not Options.Now), so that gaps between retries can
	// be measured.
	Time     time.Time
	Method   string
	Host     string
	Path     string // as sent, still escaped (URL.EscapedPath)
	RawQuery string
	Header   http.Header
	// Body holds the request body. Bodies of /files uploads are clipped to their first FilesBodyLimit bytes, other
	// bodies to OtherBodyLimit; Clipped says it happened.
	Body    []byte
	Clipped bool
}

// Limits on how much of a request body is kept.
const (
	FilesBodyLimit = 64 << 10
	OtherBodyLimit = 4 << 20
)

// Recorder keeps every request an emulator receives, in arrival order.
type Recorder struct {
	mu   sync.Mutex
	reqs []*RecordedRequest
}

func newRecorder() *Recorder { return &Recorder{} }

// record notes r at arrival. A body of known, modest length is read here, in full, and handed on from memory, so
// that it is recorded even when the request is answered without reading it (an injected fault, a 401). Bodies of
// /files uploads, of unknown length (a client stream) or larger than OtherBodyLimit are captured as the handler
// reads them instead, up to their limit.
func (rc *Recorder) record(r *http.Request) {
	rr := &RecordedRequest{
		Time:     time.Now(),
		Method:   r.Method,
		Host:     r.Host,
		Path:     r.URL.EscapedPath(),
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, rr)
	rc.mu.Unlock()
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	files := strings.HasPrefix(r.URL.Path, "/files")
	if files || r.ContentLength < 0 || r.ContentLength > OtherBodyLimit {
		limit := OtherBodyLimit
		if files {
			limit = FilesBodyLimit
		}
		r.Body = &capturingBody{ReadCloser: r.Body, rc: rc, rr: rr, limit: limit}
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength))
	rc.mu.Lock()
	rr.Body = bytes.Clone(body)
	rc.mu.Unlock()
	var reader io.Reader = bytes.NewReader(body)
	if err != nil {
		reader = io.MultiReader(reader, errReader{err})
	}
	r.Body = readCloser{Reader: reader, Closer: r.Body}
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// capturingBody copies the first limit bytes the handler reads into the record.
type capturingBody struct {
	io.ReadCloser
	rc    *Recorder
	rr    *RecordedRequest
	limit int
}

func (c *capturingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.rc.mu.Lock()
		room := c.limit - len(c.rr.Body)
		if room > 0 {
			take := min(room, n)
			c.rr.Body = append(c.rr.Body, p[:take]...)
			if take < n {
				c.rr.Clipped = true
			}
		} else {
			c.rr.Clipped = true
		}
		c.rc.mu.Unlock()
	}
	return n, err
}

func (rc *Recorder) requests() []RecordedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]RecordedRequest, len(rc.reqs))
	for i, rr := range rc.reqs {
		out[i] = *rr
		out[i].Header = rr.Header.Clone()
		out[i].Body = bytes.Clone(rr.Body)
	}
	return out
}

func (rc *Recorder) reset() {
	rc.mu.Lock()
	rc.reqs = nil
	rc.mu.Unlock()
}
