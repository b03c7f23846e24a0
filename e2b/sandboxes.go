package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// RequestIDMetadataKey is the metadata key under which CreateSandbox tags each sandbox with a random ID of the
// create request, so that a create whose answer was lost can be found again.
const RequestIDMetadataKey = "e2b-mcp.request_id"

// defaultSandboxTimeout is what E2B gives a sandbox created or resumed without a timeout.
const defaultSandboxTimeout = 15

// CreateSandbox creates a sandbox with POST /v2/sandboxes, as E2B's current SDKs do (v2 sandboxes are always
// secured), or POST /sandboxes on an E2B without the v2 route. A create whose outcome is unknown is reconciled by
// request id, never repeated blindly.
//
// Creating is not idempotent: sending the same create twice makes two sandboxes, and a sandbox costs money until
// it times out. So CreateSandbox tags the request with metadata RequestIDMetadataKey = a random ID (the caller's
// metadata is kept) and then:
//   - an answer of 201 returns the sandbox;
//   - 429 is retried after E2B's Retry-After (E2B created nothing), up to MaxRetries times, by the transport; a
//     connection that could not be made at all is retried the same way;
//   - any other 4xx, and 500, are returned as they are;
//   - when the outcome is unknown (the connection failed after the request may have been sent, the answer timed
//     out, or a proxy answered 502, 503 or 504), E2B is asked for sandboxes carrying the request ID. If one exists,
//     the create did happen: CreateSandbox connects to it (for its envd access token and domain; GetSandbox if that
//     fails) and returns it. If none exists, the create is tried again, at most MaxRetries more times.
//
// If ctx ends while the outcome is unknown, a sandbox that the abandoned request made is looked for and killed in
// the background (bounded by RequestTimeout), so that cancelling does not leave a sandbox running unseen.
func (c *Client) CreateSandbox(ctx context.Context, req NewSandbox) (*Sandbox, error) {
	const op = "create sandbox"
	if err := ctx.Err(); err != nil {
		return nil, contextError(op, err)
	}
	requestID := newRequestID()
	body := req
	body.Metadata = maps.Clone(req.Metadata)
	if body.Metadata == nil {
		body.Metadata = map[string]string{}
	}
	body.Metadata[RequestIDMetadataKey] = requestID
	if body.EnvVars == nil {
		body.EnvVars = map[string]string{}
	}
	log := c.cfg.Logger.With("op", op, "request_id", requestID)
	for attempt := 1; ; attempt++ {
		call := apiCall{op: op, method: http.MethodPost, path: "/v2/sandboxes", body: body.v2(),
			secrets: req.Network.HeaderValues()}
		if c.v1Only.Load() {
			call.path, call.body = "/sandboxes", body.v1()
		}
		ans, err := c.do(ctx, call, http.StatusCreated)
		if err == nil {
			return decodePtr[Sandbox](op, ans)
		}
		if call.path != "/sandboxes" && routeMissing(err, call.path) {
			// An E2B without the v2 routes created nothing: the same create goes to the v1 route at once.
			log.Debug("e2b: no v2 create route, using the v1 one", "error", err)
			c.v1Only.Store(true)
			attempt--
			continue
		}
		if !outcomeUnknown(err) {
			if ctx.Err() != nil && mayHaveBeenSent(err) {
				c.cleanupAbandoned(requestID)
			}
			return nil, err
		}
		log.Debug("e2b: create outcome unknown, looking for the sandbox", "attempt", attempt, "error", err)
		found, findErr := c.findCreated(ctx, requestID, req.Timeout)
		if findErr != nil {
			if ctx.Err() != nil {
				c.cleanupAbandoned(requestID)
			}
			return nil, fmt.Errorf("%w; looking for the sandbox it may have created failed too: %v", err, findErr)
		}
		if found != nil {
			log.Debug("e2b: create had succeeded", "sandbox_id", found.SandboxID)
			return found, nil
		}
		if attempt > c.cfg.MaxRetries {
			return nil, err
		}
		wait := exponentialBackoff(c.cfg.RetryWaitMin, c.cfg.RetryWaitMax, attempt-1)
		log.Debug("e2b: no sandbox was created, creating again", "attempt", attempt, "wait", wait)
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, contextError(op, err)
		}
	}
}

// routeMissing reports whether E2B answered a call to path as a server without that route (404 or 405: a bare
// page, or an error naming the path or no matching operation), as against, say, a sandbox or a template that
// does not exist.
func routeMissing(err error, path string) bool {
	var ae *APIError
	if !errors.As(err, &ae) || (ae.Status != http.StatusNotFound && ae.Status != http.StatusMethodNotAllowed) {
		return false
	}
	return !ae.fromE2B || strings.Contains(ae.Message, path) || strings.Contains(ae.Message, "no matching operation")
}

// outcomeUnknown reports whether a failed create may nevertheless have created a sandbox.
func outcomeUnknown(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, ErrNoAnswer) && !notSent(err)
}

// mayHaveBeenSent is true for a create that ended without E2B's answer (a cancelled context included) other than a
// connection that was never made.
func mayHaveBeenSent(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return false
	}
	return !notSent(err)
}

// findCreated looks for the sandbox a create with requestID made, and returns it as create would have (nil when
// there is none). Were there several, the first is kept and the others, which nobody knows of, are killed.
func (c *Client) findCreated(ctx context.Context, requestID string, timeout int) (*Sandbox, error) {
	list, err := c.ListSandboxes(ctx, ListQuery{Metadata: map[string]string{RequestIDMetadataKey: requestID}})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, nil
	}
	for _, extra := range list[1:] {
		if err := c.KillSandbox(ctx, extra.SandboxID); err != nil && !errors.Is(err, ErrNotFound) {
			c.cfg.Logger.Debug("e2b: killing a duplicate sandbox failed", "sandbox_id", extra.SandboxID, "error", err)
		}
	}
	id := list[0].SandboxID
	if timeout <= 0 {
		timeout = defaultSandboxTimeout
	}
	sb, _, err := c.ConnectSandbox(ctx, id, timeout)
	if err == nil {
		return sb, nil
	}
	c.cfg.Logger.Debug("e2b: connecting to the found sandbox failed, reading its detail", "sandbox_id", id, "error", err)
	d, derr := c.GetSandbox(ctx, id)
	if derr != nil {
		return nil, derr
	}
	return &Sandbox{
		SandboxID: d.SandboxID, TemplateID: d.TemplateID, ClientID: d.ClientID, Alias: d.Alias,
		EnvdVersion: d.EnvdVersion, EnvdAccessToken: d.EnvdAccessToken, Domain: d.Domain,
	}, nil
}

// cleanupAbandoned kills, in the background, any sandbox made by a create whose caller gave up on it.
func (c *Client) cleanupAbandoned(requestID string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
		defer cancel()
		list, err := c.ListSandboxes(ctx, ListQuery{Metadata: map[string]string{RequestIDMetadataKey: requestID}})
		if err != nil {
			c.cfg.Logger.Debug("e2b: looking for an abandoned sandbox failed", "request_id", requestID, "error", err)
			return
		}
		for _, sb := range list {
			err := c.KillSandbox(ctx, sb.SandboxID)
			c.cfg.Logger.Debug("e2b: killed a sandbox whose create was abandoned", "sandbox_id", sb.SandboxID, "error", err)
		}
	}()
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func decodePtr[T any](op string, ans *apiAnswer) (*T, error) {
	v, err := decode[T](op, ans)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// ConnectSandbox resumes a paused sandbox (resumed=true, 201) or extends a running one's timeout (200), with the
// v2 route E2B's current SDKs send, or the v1 one on an E2B without it.
func (c *Client) ConnectSandbox(ctx context.Context, id string,
	timeoutSeconds int) (sb *Sandbox, resumed bool, err error) {
	const op = "connect sandbox"
	id, err = c.checkSandboxID(op, id)
	if err != nil {
		return nil, false, err
	}
	call := apiCall{op: op, method: http.MethodPost, path: "/v2/sandboxes/" + id + "/connect",
		body: wire.TimeoutRequest{Timeout: new(int64(timeoutSeconds))}, idempotent: true, sandboxID: id}
	if c.v1Only.Load() {
		call.path = "/sandboxes/" + id + "/connect"
	}
	ans, err := c.do(ctx, call, http.StatusOK, http.StatusCreated)
	if err != nil && !c.v1Only.Load() && routeMissing(err, call.path) {
		c.v1Only.Store(true)
		call.path = "/sandboxes/" + id + "/connect"
		ans, err = c.do(ctx, call, http.StatusOK, http.StatusCreated)
	}
	if err != nil {
		return nil, false, err
	}
	sb, err = decodePtr[Sandbox](op, ans)
	if err != nil {
		return nil, false, err
	}
	return sb, ans.status == http.StatusCreated, nil
}

// GetSandbox returns a running or paused sandbox's detail.
func (c *Client) GetSandbox(ctx context.Context, id string) (*SandboxDetail, error) {
	const op = "get sandbox"
	id, err := c.checkSandboxID(op, id)
	if err != nil {
		return nil, err
	}
	ans, err := c.do(ctx, apiCall{op: op, method: http.MethodGet, path: "/sandboxes/" + id, idempotent: true,
		sandboxID: id}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return decodePtr[SandboxDetail](op, ans)
}

// maxPages bounds how many pages one listing follows, so that a server repeating itself cannot loop us forever.
const maxPages = 10000

// listPages follows the X-Next-Token pages of a listing and joins them; page is the call for the page after
// token ("" for the first). A token E2B repeats, or more than maxPages pages, is an error.
func listPages[T any](ctx context.Context, c *Client, op string, page func(token string) apiCall) ([]T, error) {
	all := []T{}
	seen := map[string]bool{}
	token := ""
	for range maxPages {
		ans, err := c.do(ctx, page(token), http.StatusOK)
		if err != nil {
			return nil, err
		}
		items, err := decode[[]T](op, ans)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		token = ans.header.Get("X-Next-Token")
		if token == "" {
			return all, nil
		}
		if seen[token] {
			return nil, errorf(op, ErrBadAnswer, "E2B repeated a page token")
		}
		seen[token] = true
	}
	return nil, errorf(op, ErrBadAnswer, "more than %d pages", maxPages)
}

// ListSandboxes follows X-Next-Token pages and returns every matching sandbox.
func (c *Client) ListSandboxes(ctx context.Context, q ListQuery) ([]ListedSandbox, error) {
	const op = "list sandboxes"
	return listPages[ListedSandbox](ctx, c, op, func(token string) apiCall {
		return apiCall{op: op, method: http.MethodGet, path: "/v2/sandboxes", rawQuery: listQuery(q, token), idempotent: true}
	})
}

// listQuery encodes a listing's query as E2B's SDKs do: metadata as one urlencoded "k=v&k=v" value, state as one
// comma-joined value.
//
// The metadata value is escaped whole, '%' included. E2B's server decodes it three times (the query string, then
// the whole value, then each key and value), so this is the encoding under which every key and value arrives
// intact. The Python SDK (httpx) leaves the "%XX" of the inner string as they are, which is byte for byte the same
// for keys and values made of letters, digits and "-._~" (request IDs, session names), but loses '%' and '+'
// (an owner like "alice+ci@example.com") on E2B's side.
func listQuery(q ListQuery, token string) string {
	var qb queryBuilder
	if len(q.Metadata) > 0 {
		qb.addRaw("metadata", pyQuote(metadataQuery(q.Metadata), ""))
	}
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, s := range q.States {
			states[i] = httpxQuote(s)
		}
		qb.addRaw("state", strings.Join(states, ","))
	}
	if q.Template != "" {
		qb.add("template", q.Template)
	}
	if q.Order != "" {
		qb.add("order", q.Order)
	}
	if q.PageSize > 0 {
		qb.add("limit", strconv.Itoa(q.PageSize))
	}
	if token != "" {
		qb.add("nextToken", token)
	}
	return qb.String()
}

// KillSandbox deletes a sandbox; a 404 is returned as an error matching ErrNotFound.
func (c *Client) KillSandbox(ctx context.Context, id string) error {
	const op = "kill sandbox"
	id, err := c.checkSandboxID(op, id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, apiCall{op: op, method: http.MethodDelete, path: "/sandboxes/" + id, idempotent: true,
		sandboxID: id}, http.StatusNoContent)
	return err
}

// PauseSandbox pauses; alreadyPaused is true (and err nil) when E2B answered 409 because it was paused already.
func (c *Client) PauseSandbox(ctx context.Context, id string) (alreadyPaused bool, err error) {
	const op = "pause sandbox"
	id, err = c.checkSandboxID(op, id)
	if err != nil {
		return false, err
	}
	// {"memory": true} keeps the memory snapshot, so that processes continue on resume (SDK default).
	_, err = c.do(ctx, apiCall{op: op, method: http.MethodPost, path: "/sandboxes/" + id + "/pause",
		body: wire.PauseRequest{Memory: new(true)}, idempotent: true, sandboxID: id}, http.StatusNoContent)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict && isAlreadyPaused(ae.Message) {
		return true, nil
	}
	return false, err
}

// isAlreadyPaused tells E2B's "already paused" 409 from its 409 for a sandbox in another transition ("cannot be
// paused while in 'killing' state"), which is an error. A sandbox already being paused counts as paused.
func isAlreadyPaused(msg string) bool {
	return !strings.Contains(msg, "cannot be paused while") || strings.Contains(msg, "'pausing'")
}

// SetTimeout sets the sandbox's expiry to now + seconds (it may shorten it).
func (c *Client) SetTimeout(ctx context.Context, id string, seconds int) error {
	const op = "set sandbox timeout"
	id, err := c.checkSandboxID(op, id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, apiCall{op: op, method: http.MethodPost, path: "/sandboxes/" + id + "/timeout",
		body: wire.TimeoutRequest{Timeout: new(int64(seconds))}, idempotent: true, sandboxID: id}, http.StatusNoContent)
	return err
}

// CreateSnapshot snapshots a sandbox (E2B pauses it briefly); the snapshot ID works as a templateID.
func (c *Client) CreateSnapshot(ctx context.Context, id, name string) (*SnapshotInfo, error) {
	const op = "create snapshot"
	id, err := c.checkSandboxID(op, id)
	if err != nil {
		return nil, err
	}
	var body wire.SnapshotRequest
	if name != "" {
		body.Name = &name
	}
	ans, err := c.do(ctx, apiCall{op: op, method: http.MethodPost, path: "/sandboxes/" + id + "/snapshots",
		body: body, sandboxID: id}, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	info, err := decodePtr[SnapshotInfo](op, ans)
	if err == nil && info.Names == nil {
		info.Names = []string{}
	}
	return info, err
}

// ListSnapshots lists snapshots, of one sandbox when sandboxID is not empty, following pages.
func (c *Client) ListSnapshots(ctx context.Context, sandboxID string) ([]SnapshotInfo, error) {
	const op = "list snapshots"
	if sandboxID != "" {
		id, err := c.checkSandboxID(op, sandboxID)
		if err != nil {
			return nil, err
		}
		sandboxID = id
	}
	all, err := listPages[SnapshotInfo](ctx, c, op, func(token string) apiCall {
		var qb queryBuilder
		if sandboxID != "" {
			qb.add("sandboxID", sandboxID)
		}
		if token != "" {
			qb.add("nextToken", token)
		}
		return apiCall{op: op, method: http.MethodGet, path: "/snapshots", rawQuery: qb.String(), idempotent: true,
			sandboxID: sandboxID}
	})
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Names == nil {
			all[i].Names = []string{}
		}
	}
	return all, nil
}

// DeleteSnapshot deletes a snapshot (DELETE /templates/{id}); a 404 matches ErrNotFound.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	const op = "delete snapshot"
	if snapshotID == "" {
		return errorf(op, ErrInvalidArgument, "empty snapshot ID: %v", ErrInvalidArgument)
	}
	// Escaped as the SDK does (quote(id, safe="")): "team/name:tag" becomes one path segment.
	_, err := c.do(ctx, apiCall{op: op, method: http.MethodDelete, path: "/templates/" + pyQuote(snapshotID, ""),
		idempotent: true}, http.StatusNoContent)
	return err
}

// ForkSandbox boots count copies of a live sandbox.
func (c *Client) ForkSandbox(ctx context.Context, id string, req ForkRequest) ([]ForkResult, error) {
	const op = "fork sandbox"
	id, err := c.checkSandboxID(op, id)
	if err != nil {
		return nil, err
	}
	// Zero means "E2B's default": one fork, with E2B's default timeout.
	body := wire.ForkRequest{Count: new(int64(max(req.Count, 1)))}
	if req.Timeout > 0 {
		body.Timeout = new(int64(req.Timeout))
	}
	ans, err := c.do(ctx, apiCall{op: op, method: http.MethodPost, path: "/sandboxes/" + id + "/fork",
		body: body, sandboxID: id}, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	results, err := decode[[]wire.ForkResult](op, ans)
	if err != nil {
		return nil, err
	}
	out := make([]ForkResult, len(results))
	for i, w := range results {
		switch {
		case w.Sandbox != nil:
			out[i].Sandbox = w.Sandbox
		case w.Error != nil:
			out[i].Error = &APIError{Op: op, Status: w.Error.Code, Code: c.redact(w.Error.ErrorCode),
				Message: c.redact(w.Error.Message), SandboxID: id, controlPlane: true}
		default:
			out[i].Error = &APIError{Op: op, Status: http.StatusInternalServerError, SandboxID: id, controlPlane: true,
				Message: "E2B answered a fork result with neither a sandbox nor an error"}
		}
	}
	return out, nil
}
