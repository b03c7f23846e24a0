package e2b

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// DownloadOptions select part of a file. Length 0 means to the end.
type DownloadOptions struct {
	Offset, Length int64
}

// filesQuery is the query of /files: path, and username when a user is sent.
func (e *Envd) filesQuery(path string) string {
	q := "path=" + url.QueryEscape(path)
	if u := e.effectiveUser(); u != "" {
		q += "&username=" + url.QueryEscape(u)
	}
	return q
}

// Download streams a file's bytes (GET /files, Range for partial reads). The caller closes the reader.
// size is the whole file's size when envd says it (-1 otherwise).
func (e *Envd) Download(ctx context.Context, path string,
	opts DownloadOptions) (r io.ReadCloser, size int64, err error) {
	const op = "envd download"
	if opts.Offset < 0 || opts.Length < 0 {
		return nil, 0, errorf(op, ErrInvalidArgument, "negative offset or length")
	}
	parent := ctx
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	req, err := e.newRequest(ctx, http.MethodGet, "/files?"+e.filesQuery(path), nil)
	if err != nil {
		cancel()
		return nil, 0, errorf(op, ErrInvalidArgument, "%w", err)
	}
	// Raw bytes: without this, Go's transport would ask for gzip, hide the length and decompress on the fly.
	req.Header.Set("Accept-Encoding", "identity")
	ranged := opts.Offset > 0 || opts.Length > 0
	if ranged {
		rng := fmt.Sprintf("bytes=%d-", opts.Offset)
		if opts.Length > 0 {
			rng += strconv.FormatInt(opts.Offset+opts.Length-1, 10)
		}
		req.Header.Set("Range", rng)
	}
	// The request timeout bounds the wait for the answer's headers, not the transfer of the body.
	headerTimer := time.AfterFunc(e.client.cfg.RequestTimeout, func() { cancelCause(errNoAnswerInTime) })
	resp, err := e.send(op, req, true)
	if !headerTimer.Stop() && parent.Err() == nil {
		if err == nil {
			resp.Body.Close()
		}
		err = e.client.noAnswer(op, ErrTimeout, errNoAnswerInTime)
	}
	if err != nil {
		cancel()
		return nil, 0, err
	}
	body := &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	switch resp.StatusCode {
	case http.StatusOK:
		size = resp.ContentLength
		if size < 0 {
			size = -1
		}
		if !ranged {
			return body, size, nil
		}
		// A server that ignores Range sends the whole file: skip and cut here.
		if _, err := io.CopyN(io.Discard, body, opts.Offset); err != nil && !errors.Is(err, io.EOF) {
			body.Close()
			return nil, 0, e.client.transportError(ctx, op, err)
		}
		if opts.Length > 0 {
			return readCloser{io.LimitReader(body, opts.Length), body}, size, nil
		}
		return body, size, nil
	case http.StatusPartialContent:
		return body, totalFromContentRange(resp.Header.Get("Content-Range")), nil
	case http.StatusRequestedRangeNotSatisfiable:
		// The offset is at or past the end: there is nothing to read.
		size = totalFromContentRange(resp.Header.Get("Content-Range"))
		body.Close()
		return io.NopCloser(strings.NewReader("")), size, nil
	}
	defer body.Close()
	return nil, 0, e.responseError(op, resp)
}

// errNoAnswerInTime is a download whose answer did not start within the request timeout.
var errNoAnswerInTime = errors.New("envd did not answer within the request timeout")

// totalFromContentRange reads the complete length of "bytes a-b/total" or "bytes */total"; -1 when unknown.
func totalFromContentRange(v string) int64 {
	i := strings.LastIndexByte(v, '/')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v[i+1:]), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// cancelOnClose ends a download's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

type readCloser struct {
	io.Reader
	io.Closer
}

// WriteInfo is envd's answer for one uploaded file.
type WriteInfo = envd.WriteInfo

// Upload streams r to path (POST /files), creating parent directories and overwriting an existing file. r is not
// read after Upload returns. envd >= 0.5.7 gets the bytes as the raw body; older envd gets a multipart form whose
// part "file" is named by the full path, as E2B's SDKs send it.
func (e *Envd) Upload(ctx context.Context, path string, r io.Reader) (WriteInfo, error) {
	const op = "envd upload"
	src := &guardedReader{r: r}
	defer src.close()

	var body io.Reader = src
	contentType := "application/octet-stream"
	var writerDone chan struct{}
	if !e.envdAtLeast(envdVersionOctetStream) {
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		contentType = mw.FormDataContentType()
		body = pr
		writerDone = make(chan struct{})
		go func() {
			defer close(writerDone)
			part, err := mw.CreateFormFile("file", path)
			if err == nil {
				_, err = io.Copy(part, src)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		defer func() {
			pr.CloseWithError(errors.New("upload finished"))
			<-writerDone
		}()
	}
	req, err := e.newRequest(ctx, http.MethodPost, "/files?"+e.filesQuery(path), body)
	if err != nil {
		return WriteInfo{}, errorf(op, ErrInvalidArgument, "%w", err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := e.send(op, req, false)
	if err != nil {
		return WriteInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return WriteInfo{}, e.responseError(op, resp)
	}
	var infos []WriteInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&infos); err != nil {
		return WriteInfo{}, errorf(op, ErrBadAnswer, "unexpected answer from envd: %w", err)
	}
	if len(infos) == 0 {
		return WriteInfo{}, errorf(op, ErrBadAnswer, "envd reported no file written")
	}
	return infos[0], nil
}

// guardedReader stops reads once closed, so that a transport that finishes with a request body in the
// background cannot read the caller's reader after Upload has returned.
type guardedReader struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (g *guardedReader) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, errors.New("e2b: upload already finished")
	}
	return g.r.Read(p)
}

func (g *guardedReader) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// FileOp is what a signed URL allows.
type FileOp string

// The operations of signed URLs: read for GET /files, write for POST /files.
const (
	FileRead  FileOp = "read"
	FileWrite FileOp = "write"
)

// SignedURL returns a URL that reads (GET) or writes (POST) path without headers, for handing to a browser or
// another program. For a secure sandbox it carries envd's v1 signature, valid for expiry (0: until the sandbox
// ends); a sandbox without an access token needs no signature.
func (e *Envd) SignedURL(path string, op FileOp, expiry time.Duration) (string, error) {
	if op != FileRead && op != FileWrite {
		return "", errorf("signed URL", ErrInvalidArgument, "operation %q is neither read nor write", op)
	}
	if expiry < 0 {
		return "", errorf("signed URL", ErrInvalidArgument, "negative expiry")
	}
	user := e.effectiveUser()
	q := "path=" + url.QueryEscape(path)
	if user != "" {
		q += "&username=" + url.QueryEscape(user)
	}
	if e.conn.AccessToken != "" {
		var exp *int64
		if expiry > 0 {
			t := e.client.now().Add(expiry).Unix()
			exp = &t
		}
		q += "&signature=" + url.QueryEscape(fileSignature(path, op, user, e.conn.AccessToken, exp))
		if exp != nil {
			q += "&signature_expiration=" + strconv.FormatInt(*exp, 10)
		}
	}
	return e.hostURL() + "/files?" + q, nil
}

// fileSignature is envd's v1 signature: "v1_" + unpadded standard base64 of
// sha256("<path>:<operation>:<username>:<token>[:<expiration>]").
func fileSignature(path string, op FileOp, user, token string, expiration *int64) string {
	raw := path + ":" + string(op) + ":" + user + ":" + token
	if expiration != nil {
		raw += ":" + strconv.FormatInt(*expiration, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}
