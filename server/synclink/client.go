package synclink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Client is the command line's side of a link: its steps, each sent with the ticket the one before gave.
type Client struct {
	base, ticket, token string
	hc                  *http.Client
}

// NewClient is the client of link, which sends token as its bearer token, over hc without its redirects. server is
// the member's own word for their team server (its URL, with the path it is mounted under if any): a link that
// points anywhere else is refused before anything is sent.
//
// The link is text a model handed on, and a prompt-injected one may point it at a host of its own, to be sent the
// token and the member's files (in) or to answer with a patch of its own (out). The ticket's signature is the
// server's to check, not the command's: the member's pin is what ties the link to their server. The token goes to
// that server alone: in the clear only to this machine, and never on through a redirect (which would send it, the
// ticket and the step's body, the user's files, to wherever it points).
func NewClient(link, server, token string, hc *http.Client) (*Client, error) {
	base, ticket, err := SplitLink(link)
	if err != nil {
		return nil, err
	}
	if err := checkServer(base, server); err != nil {
		return nil, err
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "https" && !loopback.Host(u.Hostname())) {
		return nil, errors.New("a sync link over plain http to another machine would send your token in the clear: " +
			"the server's link must be https")
	}
	noRedirects := *hc
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: base, ticket: ticket, token: token, hc: &noRedirects}, nil
}

// place is where a URL points, as a server is told apart: the scheme, the host (without case or the trailing dot
// of a fully qualified name), the port (the scheme's default made explicit) and the path.
type place struct{ scheme, host, port, path string }

func placeOf(u *url.URL) place {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return place{scheme: u.Scheme, host: strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port: port,
		path: strings.TrimSuffix(u.EscapedPath(), "/")}
}

func (p place) String() string { return p.scheme + "://" + net.JoinHostPort(p.host, p.port) + p.path }

// ErrNotTheServer ends the refusal of a link for want of the member's server: the link points elsewhere, or the
// server they pinned is no URL.
var ErrNotTheServer = errors.New("nothing was sent")

// checkServer checks that base, a link's address of its steps (SplitLink), is that of server's links.
func checkServer(base, server string) error {
	pin, err := url.Parse(server)
	if err != nil || (pin.Scheme != "http" && pin.Scheme != "https") || pin.Host == "" || pin.User != nil ||
		pin.RawQuery != "" || pin.Fragment != "" {
		return fmt.Errorf("your team server %q is not the URL of one (http(s)://HOST[:PORT][/PATH]): %w", server,
			ErrNotTheServer)
	}
	link, err := url.Parse(base)
	if err != nil {
		return err
	}
	// A user name in a link is no part of a server's address: it is there to make one look like another
	// (https://team.example@evil.example).
	if link.User != nil {
		return fmt.Errorf("this link names a user (%s@) before its host, which no server's link does: %w",
			link.User.Username(), ErrNotTheServer)
	}
	want := placeOf(pin)
	want.path += Path
	if got := placeOf(link); got != want {
		return fmt.Errorf("this link points at %s, not at your team server (%s): %w", got, want, ErrNotTheServer)
	}
	return nil
}

// StepError is a step the server refused or failed, with its answer's text.
type StepError struct {
	Status int
	Text   string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("the server answered %d: %s", e.Status, e.Text)
}

// The bounds on sending a step again that the server turned away for a moment (RetryHeader): the tries in all,
// and the total of the waits it asked for. Past them the member is told to ask for a new link.
const (
	maxTries     = 4
	maxRetryWait = 30 * time.Second
)

// body makes a step's body for each try of it (nil: none).
type body func() io.ReadCloser

func bytesBody(b []byte) body {
	return func() io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
}

// step POSTs body to the step and returns the answer, keeping the next step's ticket; a status other than 2xx is a
// StepError. A step the server turned away for want of a place after its ticket was spent comes with a ticket to
// send it again after Retry-After: it is sent again, with a new body, a few times within maxRetryWait.
func (c *Client) step(ctx context.Context, step string, body body, contentType string) (*http.Response, error) {
	var waited time.Duration
	for try := 1; ; try++ {
		resp, again, wait, err := c.try(ctx, step, body, contentType)
		if again == "" {
			return resp, err
		}
		if try >= maxTries || waited+wait > maxRetryWait {
			se := err.(*StepError) // try's, with again
			return nil, &StepError{Status: se.Status, Text: fmt.Sprintf("%s It was sent %d times: ask for a new link "+
				"(call the sync tool again).", se.Text, try)}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("%w (waiting to send it again: %w)", err, ctx.Err())
		case <-timer.C:
		}
		waited += wait
		c.ticket = again
	}
}

// try sends the step once. When the server turned it away with a ticket to send it again, it returns that ticket
// and the wait the server asked for besides the StepError.
func (c *Client) try(ctx context.Context, step string, body body, contentType string) (resp *http.Response,
	again string, wait time.Duration, err error) {
	var rc io.ReadCloser = http.NoBody
	if body != nil {
		rc = body()
	}
	defer func() {
		if err != nil {
			rc.Close() // a stream made for this try ends with it
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/"+step, rc)
	if err != nil {
		return nil, "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(TicketHeader, c.ticket)
	req.Header.Set("Content-Type", contentType)
	resp, err = c.hc.Do(req)
	if err != nil {
		return nil, "", 0, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		if resp.StatusCode/100 == 3 {
			text = []byte("the server redirected the step to " + resp.Header.Get("Location") + ", where a sync link's " +
				"token and files are not sent")
		}
		err = &StepError{Status: resp.StatusCode, Text: strings.TrimSpace(string(text))}
		if resp.StatusCode == http.StatusServiceUnavailable {
			again, wait = resp.Header.Get(RetryHeader), retryWait(resp.Header.Get("Retry-After"))
		}
		return nil, again, wait, err
	}
	c.ticket = resp.Header.Get(NextHeader)
	return resp, "", 0, nil
}

// retryWait is the wait a Retry-After of seconds asks for: a second when it says none.
func retryWait(header string) time.Duration {
	n, err := strconv.Atoi(header)
	if err != nil || n < 0 {
		return time.Second
	}
	return time.Duration(min(n, int(maxRetryWait/time.Second)+1)) * time.Second
}

// Begin redeems the link: what it is for, and the manifest of the last sync in.
func (c *Client) Begin(ctx context.Context) (*Begun, error) {
	resp, err := c.step(ctx, stepBegin, nil, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b Begun
	if err := json.NewDecoder(io.LimitReader(resp.Body, tools.MaxManifestBytes+1<<20)).Decode(&b); err != nil {
		return nil, fmt.Errorf("the server's answer to the link cannot be read: %w", err)
	}
	return &b, nil
}

// SendIn sends a sync in's stream (workspace.WriteSyncTar), made anew by stream for each try of the step.
func (c *Client) SendIn(ctx context.Context, stream func() io.ReadCloser) (tools.SyncReceived, error) {
	var got tools.SyncReceived
	resp, err := c.step(ctx, stepIn, stream, "application/x-tar")
	if err != nil {
		return got, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&got)
	return got, err
}

// Sandbox is the sandbox's side of a sync out through the link (workspace.Sandbox).
func (c *Client) Sandbox(ctx context.Context) *LinkSandbox { return &LinkSandbox{ctx: ctx, c: c} }

// LinkSandbox is a workspace.Sandbox through a link.
type LinkSandbox struct {
	ctx context.Context
	c   *Client
}

// List is the sandbox's listing of the link's directory.
func (s *LinkSandbox) List(pruneNames []string) ([]byte, error) {
	body, err := json.Marshal(listRequest{Prune: pruneNames})
	if err != nil {
		return nil, err
	}
	resp, err := s.c.step(s.ctx, stepList, bytesBody(body), "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, tools.MaxListingBytes+1))
}

// Fetch is a tar of the files named.
func (s *LinkSandbox) Fetch(paths []string) (io.ReadCloser, error) {
	resp, err := s.c.step(s.ctx, stepFetch, bytesBody([]byte(strings.Join(paths, "\x00"))), "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Rebase makes manifest the base of the link's directory, after an apply.
func (c *Client) Rebase(ctx context.Context, manifest []byte) error {
	resp, err := c.step(ctx, stepRebase, bytesBody(manifest), "application/json")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
