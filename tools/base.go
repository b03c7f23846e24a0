package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// base is what every tool handler shares: the dependencies and the steps common to sandbox calls (finding the
// caller's sandbox, reaching E2B, counting steps, automatic checkpoints, wording failures).
type base struct {
	clients ClientSource
	egress  egress.Source
	store   state.Store
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	// scaling shares out the decoding of images being scaled down: each takes up to a core and maxImageDecodeBytes
	// of memory, so calls take turns, each owner's behind its own.
	scaling *imagesafe.Slots
	// extended throttles the extensions of sandboxes' timeouts (keepalive.go).
	extended *extensions
	// previews makes private preview links (get_url.go); nil: sandbox ports are public.
	previews Previews
	// limitsOf is the owner's limits of the policy in force (limits.go); nil: none.
	limitsOf func(owner string) policy.Limits
	// syncLinks makes the sync tools' links where the server has no workspace roots (sync_link.go); nil: none.
	syncLinks SyncLinks
}

func newBase(d Deps) *base {
	b := &base{clients: d.Clients, egress: d.Egress, store: d.Store, cfg: d.Config.withDefaults(),
		log: d.Logger, now: d.Now,
		scaling: imagesafe.NewSlots(imagesafe.SlotsTotal, imagesafe.SlotsWait), extended: newExtensions(),
		previews: d.Previews, limitsOf: d.Limits, syncLinks: d.SyncLinks}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	// Absolute roots make "absolute path inside a root" a plain prefix question, whatever the working directory.
	roots := make([]string, 0, len(b.cfg.StorageRoots))
	for _, r := range b.cfg.StorageRoots {
		if abs, err := filepath.Abs(r); err == nil {
			r = abs
		}
		roots = append(roots, r)
	}
	b.cfg.StorageRoots = roots
	workspaces := make([]string, 0, len(b.cfg.Workspaces))
	for _, w := range b.cfg.Workspaces {
		if abs, err := filepath.Abs(w); err == nil {
			w = abs
		}
		workspaces = append(workspaces, w)
	}
	b.cfg.Workspaces = workspaces
	return b
}

// byLink reports whether the sync tools answer with a link for the user to run (sync_link.go): the server has no
// workspace roots, and can make links.
func (b *base) byLink() bool { return len(b.cfg.Workspaces) == 0 && b.syncLinks != nil }

// client returns the owner's E2B client; without a key the error wraps ErrNoAPIKey.
func (b *base) client(ctx context.Context, owner string) (*e2b.Client, error) {
	if b.clients == nil {
		return nil, fmt.Errorf("%w: the server has no source of E2B keys", ErrNoAPIKey)
	}
	c, err := b.clients.Client(ctx, owner)
	if err != nil {
		var stored *state.Error
		if errors.Is(err, ErrNoAPIKey) || errors.As(err, &stored) {
			return nil, err // the keys are kept in the state store, and errorText names its failure as such
		}
		return nil, userErrorf("Could not get the E2B API key of %s: %s", owner, state.PublicText(err))
	}
	if c == nil {
		return nil, fmt.Errorf("%w for %s", ErrNoAPIKey, owner)
	}
	return c, nil
}
