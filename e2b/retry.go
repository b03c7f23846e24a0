package e2b

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Retry policy of control-plane calls.
//
// A call is retried when retrying cannot do harm:
//   - the connection could not be made (nothing was sent): every call, for Config.RedialFor within its deadline,
//     beneath both planes (redialing);
//   - 429: E2B refused before doing anything: every call, after the server's Retry-After (capped by RetryWaitMax);
//   - 502, 503, 504 and connection failures after the request may have been sent (reset, timeout): only calls that
//     are safe to repeat (GET, DELETE, pause, timeout, connect).
//
// Creates are the exception: see CreateSandbox, which finds out what happened before trying again.

// idempotentKey marks a request's context as safe to repeat.
type idempotentKey struct{}

func withIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

func isIdempotent(ctx context.Context) bool {
	v, _ := ctx.Value(idempotentKey{}).(bool)
	return v
}

// checkRetry is the retryablehttp.CheckRetry of the control plane.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	if err != nil {
		// A connection never made was tried again by redialing for as long as it may be.
		if notSent(err) || !retryableTransportError(err) {
			return false, nil
		}
		return isIdempotent(ctx), nil
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true, nil
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return isIdempotent(ctx), nil
	}
	return false, nil
}

// retryableTransportError is false for failures that another attempt would meet again: a bad URL scheme, a
// certificate that is not trusted, a redirect loop or one to another host.
func retryableTransportError(err error) bool {
	if errors.Is(err, ErrForeignRedirect) || errors.Is(err, errRedirectLoop) {
		return false
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// net/http has no types for these.
		msg := ue.Err.Error()
		if strings.Contains(msg, "unsupported protocol scheme") || strings.Contains(msg, "invalid header") {
			return false
		}
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return !errors.As(err, &unknownAuthority) && !errors.As(err, &hostname) && !errors.As(err, &invalid)
}

// notSent reports whether a transport error happened before the request could have reached the server: the
// connection was never made (refused, DNS, unreachable).
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// defaultRedialFor is Config.RedialFor's default: past a restart or a failover of E2B's front, short of what an
// assistant waits for a call.
const defaultRedialFor = 15 * time.Second

// redialing is the transport beneath both planes. A request whose connection could not be made is tried again
// with backoff, whatever the call (a create or a command too: not a byte of it was sent), until Config.RedialFor
// after its first attempt or its context's deadline, whichever comes first, so that a short outage of E2B costs
// calls time rather than their results. A request whose body cannot be read again (a streamed upload) is not.
type redialing struct {
	next http.RoundTripper
	cfg  Config
}

func (t redialing) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	ctx := req.Context()
	giveUp := time.Now().Add(t.cfg.RedialFor)
	if d, ok := ctx.Deadline(); ok && d.Before(giveUp) {
		giveUp = d
	}
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 0; ; attempt++ {
		resp, err := next.RoundTrip(req)
		if err == nil || !notSent(err) || !replayable {
			return resp, triedError(err, attempt+1)
		}
		wait := exponentialBackoff(t.cfg.RetryWaitMin, t.cfg.RetryWaitMax, attempt)
		if time.Now().Add(wait).After(giveUp) {
			return nil, triedError(err, attempt+1)
		}
		t.cfg.Logger.Debug("e2b: E2B refused the connection, trying again", "host", req.URL.Host, "attempt",
			attempt+1, "wait", wait)
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, err
		}
		req = req.Clone(ctx)
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// CloseIdleConnections closes the idle connections of the transport beneath, as http.Client's would.
func (t redialing) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// triedError is err, saying how many attempts it survived when there were more than one.
func triedError(err error, tries int) error {
	if err == nil || tries <= 1 {
		return err
	}
	return &retriedError{err: err, tries: tries}
}

// backoff is the retryablehttp.Backoff of the control plane: the server's Retry-After on 429 and 503 (capped by
// max), else exponential from min with jitter, capped by max.
func (c *Client) backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), c.now()); ok {
			return min(d, maxWait)
		}
	}
	return exponentialBackoff(minWait, maxWait, attempt)
}

// exponentialBackoff is min·2^attempt capped by max, with the upper half jittered so that clients that failed
// together do not retry together.
func exponentialBackoff(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := minWait
	for range attempt {
		if d >= maxWait/2 {
			d = maxWait
			break
		}
		d *= 2
	}
	d = min(d, maxWait)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return d
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date. Negative delays count as none.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, true
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// retryAfterOf is the Retry-After of an answer, for APIError.RetryAfter.
func retryAfterOf(resp *http.Response, now time.Time) time.Duration {
	d, _ := parseRetryAfter(resp.Header.Get("Retry-After"), now)
	return d
}

// passthroughErrors makes retryablehttp hand back the last answer (or transport error) as it is, so that an
// exhausted retry of a 503 is reported as E2B's 503 and not as retryablehttp's "giving up" text.
func passthroughErrors(resp *http.Response, err error, tries int) (*http.Response, error) {
	return resp, triedError(err, tries)
}

// retriedError says how many attempts a transport failure survived.
type retriedError struct {
	err   error
	tries int
}

func (e *retriedError) Error() string {
	return e.err.Error() + " (gave up after " + strconv.Itoa(e.tries) + " attempts)"
}

func (e *retriedError) Unwrap() error { return e.err }

// debugLogger gives retryablehttp's messages to slog at debug level. Its messages name the method and the URL
// (never a header, so never the API key).
type debugLogger struct{ l *slog.Logger }

func (d debugLogger) Error(msg string, kv ...any) { d.l.Debug("e2b: "+msg, kv...) }
func (d debugLogger) Info(msg string, kv ...any)  { d.l.Debug("e2b: "+msg, kv...) }
func (d debugLogger) Debug(msg string, kv ...any) { d.l.Debug("e2b: "+msg, kv...) }
func (d debugLogger) Warn(msg string, kv ...any)  { d.l.Debug("e2b: "+msg, kv...) }

func newRetryClient(c *Client) *retryablehttp.Client {
	hc := *c.cfg.HTTPClient
	// Control-plane answers are small: the whole exchange, body included, is bounded per attempt.
	hc.Timeout = c.cfg.RequestTimeout
	return &retryablehttp.Client{
		HTTPClient:   &hc,
		Logger:       debugLogger{c.cfg.Logger},
		RetryWaitMin: c.cfg.RetryWaitMin,
		RetryWaitMax: c.cfg.RetryWaitMax,
		RetryMax:     c.cfg.MaxRetries,
		CheckRetry:   checkRetry,
		Backoff:      c.backoff,
		ErrorHandler: passthroughErrors,
	}
}
