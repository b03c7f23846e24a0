package e2b

import (
	"context"
	"errors"
)

// errUnbuilt marks calls whose implementation is being written; it must not survive into a release.
var errUnbuilt = errors.New("e2b: not built yet")

// CreateSandbox creates a sandbox. A create whose outcome is unknown is reconciled by request id, never repeated blindly.
func (c *Client) CreateSandbox(ctx context.Context, req NewSandbox) (*Sandbox, error) {
	return nil, errUnbuilt
}

// ConnectSandbox resumes a paused sandbox (resumed=true, 201) or extends a running one's timeout (200).
func (c *Client) ConnectSandbox(ctx context.Context, id string, timeoutSeconds int) (sb *Sandbox, resumed bool, err error) {
	return nil, false, errUnbuilt
}

// GetSandbox returns a running or paused sandbox's detail.
func (c *Client) GetSandbox(ctx context.Context, id string) (*SandboxDetail, error) {
	return nil, errUnbuilt
}

// ListSandboxes follows X-Next-Token pages and returns every matching sandbox.
func (c *Client) ListSandboxes(ctx context.Context, q ListQuery) ([]ListedSandbox, error) {
	return nil, errUnbuilt
}

// KillSandbox deletes a sandbox; a 404 is returned as an error matching ErrNotFound.
func (c *Client) KillSandbox(ctx context.Context, id string) error { return errUnbuilt }

// PauseSandbox pauses; alreadyPaused is true (and err nil) when E2B answered 409 because it was paused already.
func (c *Client) PauseSandbox(ctx context.Context, id string) (alreadyPaused bool, err error) {
	return false, errUnbuilt
}

// SetTimeout sets the sandbox's expiry to now + seconds (it may shorten it).
func (c *Client) SetTimeout(ctx context.Context, id string, seconds int) error { return errUnbuilt }

// CreateSnapshot snapshots a sandbox (E2B pauses it briefly); the snapshot ID works as a templateID.
func (c *Client) CreateSnapshot(ctx context.Context, id, name string) (*SnapshotInfo, error) {
	return nil, errUnbuilt
}

// ListSnapshots lists snapshots, of one sandbox when sandboxID is not empty, following pages.
func (c *Client) ListSnapshots(ctx context.Context, sandboxID string) ([]SnapshotInfo, error) {
	return nil, errUnbuilt
}

// DeleteSnapshot deletes a snapshot (DELETE /templates/{id}); a 404 matches ErrNotFound.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) error { return errUnbuilt }

// ForkSandbox boots count copies of a live sandbox.
func (c *Client) ForkSandbox(ctx context.Context, id string, req ForkRequest) ([]ForkResult, error) {
	return nil, errUnbuilt
}
