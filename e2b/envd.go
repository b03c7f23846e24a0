package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
)

// Envd talks to the envd daemon of one sandbox. Make one with Client.Envd; it is cheap and safe for concurrent use.
type Envd struct {
	client *Client
	conn   SandboxConn
	user   string
	// killGrace, when above zero, stands for defaultKillGrace (tests shorten it).
	killGrace time.Duration
}

// Envd returns a handle on a sandbox's envd. With envd >= 0.4.0 no user is sent unless WithUser names one,
// and envd uses the template's default user.
func (c *Client) Envd(sb SandboxConn) *Envd { return &Envd{client: c, conn: sb} }

// WithUser returns a copy of e that acts as the Linux user name (Basic auth on RPC, username= on /files).
func (e *Envd) WithUser(name string) *Envd { c := *e; c.user = name; return &c }

// Sandbox is the sandbox this handle talks to.
func (e *Envd) Sandbox() SandboxConn { return e.conn }

// envd versions from which E2B's SDKs change what they send, as versionCode numbers them.
const (
	envdVersionDefaultUser = 4_000     // 0.4.0: no user means the template's default user
	envdVersionOctetStream = 5_007     // 0.5.7: POST /files accepts a raw body
	versionPart            = 1_000     // each of minor and patch counts below this
	versionMax             = 1<<31 - 1 // larger codes do not fit the comparison
)

// envdAtLeast reports whether the sandbox's envd is at least the version code v. An unknown or unparsable version
// counts as new: E2B has reported a version for every sandbox since envd 0.1.0, so it is missing only for
// hand-made connections.
func (e *Envd) envdAtLeast(v int) bool {
	got, ok := versionCode(e.conn.EnvdVersion)
	return !ok || got >= v
}

// versionCode reads "major.minor.patch" (a leading "v" and any pre-release suffix are ignored) as
// major·10⁶ + minor·10³ + patch, so that versions compare as numbers.
func versionCode(s string) (int, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 || parts[0] == "" {
		return 0, false
	}
	code := 0
	for i := range 3 {
		n := 0
		if i < len(parts) {
			var err error
			if n, err = strconv.Atoi(parts[i]); err != nil || n < 0 || (i > 0 && n >= versionPart) ||
				n > versionMax/(versionPart*versionPart) {
				return 0, false
			}
		}
		code = code*versionPart + n
	}
	return code, true
}

// effectiveUser is the Linux user sent to envd: the one named with WithUser, else "user" for envd older than
// 0.4.0 (which has no default user), else none.
func (e *Envd) effectiveUser() string {
	if e.user != "" {
		return e.user
	}
	if !e.envdAtLeast(envdVersionDefaultUser) {
		return "user"
	}
	return ""
}

// baseURL is where this sandbox's envd answers: the configured sandbox URL (with routing headers), else the
// per-sandbox host https://49983-<id>.<domain>.
func (e *Envd) baseURL() string {
	if e.client.cfg.SandboxURL != "" {
		return e.client.cfg.SandboxURL
	}
	return e.hostURL()
}

// hostURL is the per-sandbox host, which is also what signed URLs use (a browser cannot add routing headers).
func (e *Envd) hostURL() string {
	if e.client.cfg.SandboxURL != "" {
		return e.client.cfg.SandboxURL
	}
	domain := e.conn.Domain
	if domain == "" {
		domain = e.client.cfg.Domain
	}
	return fmt.Sprintf("https://%d-%s.%s", EnvdPort, e.conn.ID, domain)
}

// newRequest makes a request to envd with the headers E2B's SDKs send on every envd request. The API key is
// never among them.
func (e *Envd) newRequest(ctx context.Context, method, pathAndQuery string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, e.baseURL()+pathAndQuery, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		// Bodies go chunked, never with a Content-Length. A Go reverse proxy in front of envd (E2B's edge proxy
		// is httputil.ReverseProxy over HTTP/1.1) that forwards a body of declared length reads it once more
		// after the last byte, to check that nothing follows; if envd has answered by then, the proxy's server
		// has already closed that body, the read fails and the proxy drops its connection to envd, cutting the
		// answer (golang/go#40747). A chunked body ends with its terminating chunk, which every hop must read
		// before passing it on, and envd answers only once it has it: no hop reads after the answer starts.
		req.ContentLength = -1
	}
	req.Header.Set("User-Agent", e.client.cfg.UserAgent)
	req.Header.Set("E2b-Sandbox-Id", e.conn.ID)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(EnvdPort))
	if e.conn.AccessToken != "" {
		req.Header.Set("X-Access-Token", e.conn.AccessToken)
	}
	return req, nil
}

// setBasicUser picks the Linux user of an RPC: Basic auth with the user name and an empty password.
func (e *Envd) setBasicUser(req *http.Request) {
	if u := e.effectiveUser(); u != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u+":")))
	}
}

// send sends req. Calls that are safe to repeat (retry=true; their bodies must be replayable) are tried again
// when the connection fails, never because of an answer; a connection never made was tried again by redialing,
// for every call.
func (e *Envd) send(op string, req *http.Request, retry bool) (*http.Response, error) {
	ctx := req.Context()
	cfg := e.client.cfg
	for attempt := 0; ; attempt++ {
		resp, err := cfg.HTTPClient.Do(req)
		if err == nil {
			return resp, nil
		}
		if !retry || attempt >= cfg.MaxRetries || ctx.Err() != nil || notSent(err) || !retryableTransportError(err) {
			return nil, e.client.transportError(ctx, op, err)
		}
		wait := exponentialBackoff(cfg.RetryWaitMin, cfg.RetryWaitMax, attempt)
		cfg.Logger.Debug("e2b: retrying envd call after a connection failure", "op", op, "attempt", attempt+1, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, e.client.transportError(ctx, op, ctx.Err())
		case <-t.C:
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, errorf(op, ErrInvalidArgument, "%w", err)
			}
			req.Body = body
		}
	}
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// responseError turns a non-success answer into an *APIError. envd answers either a Connect error
// {"code":"not_found","message":...} or a plain HTTP error {"code":401,"message":...}; E2B's edge proxy answers
// 502 {"sandboxId":...,"message":"The sandbox was not found","code":502} when the sandbox is not running; any
// other proxy may answer text or HTML.
func (e *Envd) responseError(op string, resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	apiErr := &APIError{Op: op, Status: resp.StatusCode, SandboxID: e.conn.ID}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		apiErr.RetryAfter = retryAfterOf(resp, e.client.now())
	}
	var wire struct {
		Code      json.RawMessage `json:"code"`
		Message   string          `json:"message"`
		SandboxID string          `json:"sandboxId"`
	}
	if err := json.Unmarshal(body, &wire); err == nil && (wire.Message != "" || len(wire.Code) > 0) {
		var code string
		if json.Unmarshal(wire.Code, &code) == nil {
			// A string code is a Connect error; a numeric one is a plain HTTP error, whose status says it all.
			apiErr.Code = code
		}
		apiErr.Message = wire.Message
		if wire.SandboxID != "" {
			apiErr.SandboxID = wire.SandboxID
		}
	} else {
		apiErr.Message = clipText(body)
	}
	apiErr.Message = e.redact(apiErr.Message)
	return apiErr
}

// redact removes secrets from text that came from elsewhere: a proxy could echo a request back.
func (e *Envd) redact(s string) string {
	return scrub(e.client.redact(s), e.conn.AccessToken)
}

// wireError is a Connect error that arrived as a message (an end-of-stream error).
func (e *Envd) wireError(op string, w *connectframe.Error) *APIError {
	code := w.Code
	if code == "" {
		code = "unknown"
	}
	return &APIError{Op: op, Status: connectframe.CodeStatus(code), Code: code, Message: e.redact(w.Message),
		SandboxID: e.conn.ID}
}

// unary makes a unary Connect call: in is sent as JSON and the answer decoded into out (which may be nil).
func (e *Envd) unary(ctx context.Context, op, procedure string, in, out any, retry bool) error {
	body, err := json.Marshal(in)
	if err != nil {
		return errorf(op, ErrInvalidArgument, "encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.client.cfg.RequestTimeout)
	defer cancel()
	req, err := e.newRequest(ctx, http.MethodPost, "/"+procedure, bytes.NewReader(body))
	if err != nil {
		return errorf(op, ErrInvalidArgument, "%w", err)
	}
	req.Header.Set("Content-Type", connectframe.ContentTypeUnary)
	req.Header.Set("Connect-Protocol-Version", "1")
	e.setBasicUser(req)
	resp, err := e.send(op, req, retry)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e.responseError(op, resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, connectMaxMessage+1))
	if err != nil {
		return e.client.transportError(ctx, op, err)
	}
	if len(data) > connectMaxMessage {
		return errorf(op, ErrBadAnswer, "answer exceeds %d bytes", connectMaxMessage)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errorf(op, ErrBadAnswer, "unexpected answer from envd: %w", err)
	}
	return nil
}

// streamOptions are the per-call headers of a server stream.
type streamOptions struct {
	timeout   time.Duration // Connect-Timeout-Ms; 0 sends none
	keepalive time.Duration // Keepalive-Ping-Interval, in whole seconds; 0 sends none
}

// serverStream makes a server-streaming Connect call and gives each message to onMessage (valid only during the
// call) until the stream ends. An end-of-stream error becomes an *APIError, and a stream that ends without an
// end-of-stream message is an error too, because its answer is incomplete.
func (e *Envd) serverStream(ctx context.Context, op, procedure string, in any, so streamOptions,
	onMessage func([]byte) error) error {
	payload, err := json.Marshal(in)
	if err != nil {
		return errorf(op, ErrInvalidArgument, "encode request: %w", err)
	}
	body := connectframe.Append(make([]byte, 0, connectframe.HeaderLen+len(payload)), 0, payload)
	req, err := e.newRequest(ctx, http.MethodPost, "/"+procedure, bytes.NewReader(body))
	if err != nil {
		return errorf(op, ErrInvalidArgument, "%w", err)
	}
	req.Header.Set("Content-Type", connectframe.ContentTypeStream)
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Content-Encoding", "identity")
	if so.timeout > 0 {
		req.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(max(so.timeout.Milliseconds(), 1), 10))
	}
	if so.keepalive > 0 {
		req.Header.Set("Keepalive-Ping-Interval", strconv.FormatInt(max(int64(so.keepalive/time.Second), 1), 10))
	}
	e.setBasicUser(req)
	resp, err := e.send(op, req, false)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e.responseError(op, resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, connectframe.ContentTypeStream) {
		return errorf(op, ErrBadAnswer, "unexpected answer from envd: content type %q", ct)
	}
	var callbackErr error
	end, err := readConnectStream(resp.Body, connectMaxMessage, func(msg []byte) error {
		callbackErr = onMessage(msg)
		return callbackErr
	})
	var perr *protocolError
	switch {
	case err == nil:
	case err == callbackErr:
		return err
	case ctx.Err() != nil:
		return contextError(op, ctx.Err())
	case errors.As(err, &perr):
		return errorf(op, ErrBadAnswer, "unexpected answer from envd: %w", err)
	case errors.Is(err, errStreamCut):
		return e.client.noAnswer(op, ErrStreamCut, err)
	default:
		return e.client.transportError(ctx, op, err)
	}
	if end.Error != nil {
		return e.wireError(op, end.Error)
	}
	return nil
}

// Health reports whether envd answers (GET /health 204); a stopped sandbox matches ErrSandboxGone.
func (e *Envd) Health(ctx context.Context) error {
	const op = "envd health"
	ctx, cancel := context.WithTimeout(ctx, e.client.cfg.RequestTimeout)
	defer cancel()
	req, err := e.newRequest(ctx, http.MethodGet, "/health", nil)
	if err != nil {
		return errorf(op, ErrInvalidArgument, "%w", err)
	}
	resp, err := e.send(op, req, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return e.responseError(op, resp)
	}
	return nil
}
