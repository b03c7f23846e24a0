package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// maxAnswer bounds how much of a control-plane answer is read (a page of 100 sandboxes is far smaller).
const maxAnswer = 16 << 20

// apiCall is one control-plane request.
type apiCall struct {
	op         string // for errors: "create sandbox"
	method     string
	path       string // escaped, starting with "/"
	rawQuery   string // already encoded
	body       any    // sent as JSON when not nil
	idempotent bool   // safe to repeat after an uncertain failure
	sandboxID  string // for errors
	// secrets are values the body carries besides the API key (egress header values); an answer that echoes
	// the request never brings them into an error.
	secrets []string
}

// apiAnswer is a control-plane answer with its body read.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a control-plane call with the retry policy of retry.go and reads the answer. Answers with a status in
// ok are returned; any other becomes an *APIError. Transport failures are returned wrapped, with the operation
// named and the API key never in the text.
func (c *Client) do(ctx context.Context, call apiCall, ok ...int) (*apiAnswer, error) {
	if c.cfg.APIKey == "" {
		return nil, errorf(call.op, ErrUnauthorized, "no E2B API key is configured: %v", ErrUnauthorized)
	}
	var body []byte
	if call.body != nil {
		b, err := json.Marshal(call.body)
		if err != nil {
			return nil, errorf(call.op, ErrInvalidArgument, "encode request: %w", err)
		}
		body = b
	}
	if call.idempotent {
		ctx = withIdempotent(ctx)
	}
	u := c.cfg.APIURL + call.path
	if call.rawQuery != "" {
		u += "?" + call.rawQuery
	}
	var rawBody any
	if body != nil {
		rawBody = body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, call.method, u, rawBody)
	if err != nil {
		return nil, &Error{Op: call.op, Kind: ErrInvalidArgument, msg: c.redact(err.Error(), call.secrets...), err: err}
	}
	req.Header.Set("X-API-Key", c.cfg.APIKey)
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.rc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, call.op, err, call.secrets...)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, c.transportError(ctx, call.op, err, call.secrets...)
	}
	ans := &apiAnswer{status: resp.StatusCode, header: resp.Header, body: data}
	if slices.Contains(ok, resp.StatusCode) {
		return ans, nil
	}
	return nil, c.apiError(call, resp, data)
}

// transportError is a failure to get an answer (ErrNoAnswer, or ErrTimeout when the transport timed out), without
// the API key or secrets in its text. A cancelled or expired context is reported as such.
func (c *Client) transportError(ctx context.Context, op string, err error, secrets ...string) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return contextError(op, ctxErr)
	}
	kind := ErrNoAnswer
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		kind = ErrTimeout
	}
	return c.noAnswer(op, kind, err, secrets...)
}

// noAnswer is a call of kind ErrNoAnswer, ErrTimeout or ErrStreamCut that got no complete answer because of err.
func (c *Client) noAnswer(op string, kind, err error, secrets ...string) *Error {
	return &Error{Op: op, Kind: kind, msg: "no answer from E2B: " + c.redact(err.Error(), secrets...), err: err}
}

// apiError turns an unexpected answer into an *APIError: E2B's JSON {code, message, error_code} when the body is
// one, else the start of whatever a proxy sent (an HTML error page, say).
func (c *Client) apiError(call apiCall, resp *http.Response, body []byte) *APIError {
	e := &APIError{Op: call.op, Status: resp.StatusCode, SandboxID: call.sandboxID,
		RetryAfter:   retryAfterOf(resp, c.now()),
		controlPlane: true}
	var answer wire.Error
	if json.Unmarshal(body, &answer) == nil && (answer.Message != "" || answer.Code != 0) {
		e.Message, e.Code, e.fromE2B = answer.Message, answer.ErrorCode, true
	} else {
		e.Message = clipText(body)
	}
	e.Message = c.redact(e.Message, call.secrets...)
	e.Code = c.redact(e.Code, call.secrets...)
	return e
}

var (
	htmlTitle = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	htmlTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	spaces    = regexp.MustCompile(`\s+`)
)

// clipText makes a short one-line message of a non-JSON error body: an HTML page's title (or its text), clipped.
func clipText(body []byte) string {
	s := string(body)
	if m := htmlTitle.FindStringSubmatch(s); m != nil && strings.TrimSpace(m[1]) != "" {
		s = m[1]
	} else {
		s = htmlTag.ReplaceAllString(s, " ")
	}
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	s = strings.ToValidUTF8(s, "?")
	const max = 200
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// redact removes the API key, and the call's other secrets, from text that came from elsewhere (a proxy could
// echo a request back).
func (c *Client) redact(s string, secrets ...string) string {
	for _, secret := range append([]string{c.cfg.APIKey}, secrets...) {
		if secret != "" && strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// decode unmarshals a JSON answer, naming the call when E2B's answer is not what the protocol says.
func decode[T any](op string, ans *apiAnswer) (T, error) {
	var v T
	if err := json.Unmarshal(ans.body, &v); err != nil {
		return v, errorf(op, ErrBadAnswer, "unexpected answer from E2B (HTTP %d): %w", ans.status, err)
	}
	return v, nil
}

var sandboxIDPattern = regexp.MustCompile(`^[a-z0-9]+$`)

// checkSandboxID validates a sandbox ID and returns it as E2B names it: the legacy "<id>-<clientID>" form keeps the
// part before the dash, as E2B's server does. Checking here keeps a malformed ID from ever becoming a URL.
func (c *Client) checkSandboxID(op, id string) (string, error) {
	short := id
	if parts := strings.Split(id, "-"); len(parts) == 2 {
		short = parts[0]
	}
	if !sandboxIDPattern.MatchString(short) {
		shown := c.redact(id)
		if len(shown) > 64 {
			shown = shown[:64] + "…"
		}
		return "", errorf(op, ErrInvalidArgument, "invalid sandbox ID %q: %v", shown, ErrInvalidArgument)
	}
	return short, nil
}

// pyQuote percent-encodes s as Python's urllib.parse.quote does: every byte except ASCII letters, digits and
// "_.-~" and the bytes in safe becomes %XX (upper-case hex).
func pyQuote(s, safe string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if isUnreserved(ch) || strings.IndexByte(safe, ch) >= 0 {
			b.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", ch)
	}
	return b.String()
}

// pyQuotePlus is Python's quote_plus with safe="": as pyQuote, with spaces as "+".
func pyQuotePlus(s string) string {
	parts := strings.Split(s, " ")
	for i, p := range parts {
		parts[i] = pyQuote(p, "")
	}
	return strings.Join(parts, "+")
}

// httpxQuote encodes a query value as httpx (the Python SDK's HTTP client) does: like pyQuote with nothing safe,
// except that existing %XX sequences are kept as they are.
func httpxQuote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteString(s[i : i+3])
			i += 2
		case isUnreserved(ch):
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

func isUnreserved(ch byte) bool {
	return 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' ||
		ch == '-' || ch == '.' || ch == '_' || ch == '~'
}

func isHex(ch byte) bool {
	return '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f' || 'A' <= ch && ch <= 'F'
}

// metadataQuery builds the value of the metadata filter as E2B's Python SDK does, urlencode({quote(k): quote(v)})
// (keys sorted, so that the same filter is always the same URL). listQuery then escapes that value whole.
func metadataQuery(md map[string]string) string {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, pyQuotePlus(pyQuote(k, "/"))+"="+pyQuotePlus(pyQuote(md[k], "/")))
	}
	return strings.Join(parts, "&")
}

// queryBuilder assembles a query string in a fixed order, values encoded as httpx (the Python SDK's HTTP client)
// encodes them.
type queryBuilder struct{ parts []string }

func (q *queryBuilder) add(key, value string) {
	q.parts = append(q.parts, httpxQuote(key)+"="+httpxQuote(value))
}

// addRaw adds a value that is already encoded.
func (q *queryBuilder) addRaw(key, encoded string) {
	q.parts = append(q.parts, httpxQuote(key)+"="+encoded)
}

func (q *queryBuilder) String() string { return strings.Join(q.parts, "&") }
