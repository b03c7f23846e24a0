package synclink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Client is the command line's side of a link: its steps, each sent with the ticket the one before gave.
type Client struct {
	base, ticket, token string
	hc                  *http.Client
}

// NewClient is the client of link, which sends token as its bearer token, over hc without its redirects.
//
// The token goes to the link's server alone: in the clear only to this machine, and never on through a
// redirect (which would send it, the ticket and the step's body, the user's files, to wherever it points).
func NewClient(link, token string, hc *http.Client) (*Client, error) {
	base, ticket, err := SplitLink(link)
	if err != nil {
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

// StepError is a step the server refused or failed, with its answer's text.
type StepError struct {
	Status int
	Text   string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("the server answered %d: %s", e.Status, e.Text)
}

// step POSTs body to the step and returns the answer, keeping the next step's ticket; a status other than 2xx is a
// StepError.
func (c *Client) step(ctx context.Context, step string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/"+step, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(TicketHeader, c.ticket)
	req.Header.Set("Content-Type", contentType)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		if resp.StatusCode/100 == 3 {
			text = []byte("the server redirected the step to " + resp.Header.Get("Location") + ", where a sync link's " +
				"token and files are not sent")
		}
		return nil, &StepError{Status: resp.StatusCode, Text: strings.TrimSpace(string(text))}
	}
	c.ticket = resp.Header.Get(NextHeader)
	return resp, nil
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

// SendIn sends a sync in's stream (workspace.WriteSyncTar).
func (c *Client) SendIn(ctx context.Context, stream io.Reader) (tools.SyncReceived, error) {
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
	resp, err := s.c.step(s.ctx, stepList, bytes.NewReader(body), "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, tools.MaxListingBytes+1))
}

// Fetch is a tar of the files named.
func (s *LinkSandbox) Fetch(paths []string) (io.ReadCloser, error) {
	resp, err := s.c.step(s.ctx, stepFetch, strings.NewReader(strings.Join(paths, "\x00")), "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Rebase makes manifest the base of the link's directory, after an apply.
func (c *Client) Rebase(ctx context.Context, manifest []byte) error {
	resp, err := c.step(ctx, stepRebase, bytes.NewReader(manifest), "application/json")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
