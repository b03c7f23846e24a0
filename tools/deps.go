package tools

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// ClientSource hands out an E2B client for an owner. The key is read on every call, so a login in another
// terminal takes effect at once. When the owner has no key the error wraps ErrNoAPIKey.
type ClientSource interface {
	Client(ctx context.Context, owner string) (*e2b.Client, error)
}

// ErrNoAPIKey is wrapped by ClientSource errors when the owner has connected no E2B API key.
var ErrNoAPIKey = errors.New("no E2B API key")

// Config holds the tools' defaults and limits. Zero fields take the defaults named on each field.
type Config struct {
	// DefaultTemplate is the template of e2b_create_sandbox when the call names none ("base").
	DefaultTemplate string
	// DefaultTimeoutSeconds is a new or resumed sandbox's lifetime when the call gives none (3600).
	DefaultTimeoutSeconds int
	// OnTimeout is what E2B does to a new sandbox when its timeout runs out and the call names nothing:
	// e2b.OnTimeoutPause (the default: memory and files kept, resumed on use) or e2b.OnTimeoutKill.
	OnTimeout string
	// ExecTimeout bounds a command of e2b_exec when the call gives no timeout_ms (60 s).
	ExecTimeout time.Duration
	// ExecForegroundLimit is how long e2b_exec waits for a command before it moves it to the background, and
	// the longest e2b_read_output waits (DefaultExecForegroundLimit).
	ExecForegroundLimit time.Duration
	// TaskWait is how long a call whose client declared MCP tasks waits for its command before it becomes a task
	// (DefaultTaskWait; see tasks.go).
	TaskWait time.Duration
	// ResultLimit bounds each copy of a result a client hands its model, in characters, for every client (at
	// least MinResultLimit; see resultSize); 0 leaves it to each client's budget (Client.Budget). e2b_exec cuts
	// its output to head and tail and saves it whole in the sandbox, e2b_read_file and resource reads return what
	// fits.
	ResultLimit int
	// WriteLimitBytes bounds the content of one e2b_write_file call (10 MiB).
	WriteLimitBytes int
	// ImageLimitBytes bounds an image e2b_read_file shows the model (768 KiB, about 1 MiB in base64: what
	// assistants accept in one tool result); ImageMaxEdge bounds its longer side (1568 pixels, beyond which
	// vision models scale images down themselves). Larger images are scaled down to fit.
	ImageLimitBytes, ImageMaxEdge int
	// ImageSourceLimitBytes bounds the image files e2b_read_file fetches to scale down (16 MiB); larger ones are
	// refused with advice on shrinking them in the sandbox.
	ImageSourceLimitBytes int
	// StorageRoots are the host directories upload_files of e2b_create_sandbox may read from; none means
	// uploads are off. A relative session_path is resolved against the first root.
	StorageRoots []string
	// Workspaces are the directories of the user's machine e2b_sync_in may read and e2b_sync_out may write, with
	// everything below them; none means the sync tools are off (a team server cannot see its users' disks).
	Workspaces []string
	// SyncLimits bound one sync (workspace.DefaultLimits).
	SyncLimits workspace.Limits
	// PatchDir is where e2b_sync_out saves its patches (the user's cache directory, e2b-mcp/patches).
	PatchDir string
	// Checkpoints is the session's automatic checkpoint policy (off by default); a sandbox's own policy wins.
	Checkpoints state.CheckpointPolicy
	// ProgressInterval is the least time between two progress notifications of one call (200 ms).
	ProgressInterval time.Duration
}

// The defaults of Config.
const (
	DefaultTemplate         = "base"
	DefaultTimeoutSeconds   = 3600
	DefaultExecTimeout      = 60 * time.Second
	DefaultWriteLimitBytes  = 10 << 20
	DefaultImageLimitBytes  = 768 << 10
	DefaultImageMaxEdge     = 1568
	DefaultImageSourceLimit = 16 << 20
	DefaultProgressInterval = 200 * time.Millisecond
)

// WorkspacePath is where a sandbox's user works: the home directory of E2B's default user.
const WorkspacePath = "/home/user"

func (c Config) withDefaults() Config {
	if c.DefaultTemplate == "" {
		c.DefaultTemplate = DefaultTemplate
	}
	if c.DefaultTimeoutSeconds <= 0 {
		c.DefaultTimeoutSeconds = DefaultTimeoutSeconds
	}
	if c.OnTimeout == "" {
		c.OnTimeout = e2b.OnTimeoutPause
	}
	if c.ExecTimeout <= 0 {
		c.ExecTimeout = DefaultExecTimeout
	}
	if c.ExecForegroundLimit <= 0 {
		c.ExecForegroundLimit = DefaultExecForegroundLimit
	}
	if c.TaskWait <= 0 {
		c.TaskWait = DefaultTaskWait
	}
	if c.ResultLimit > 0 {
		c.ResultLimit = max(c.ResultLimit, MinResultLimit)
	}
	if c.WriteLimitBytes <= 0 {
		c.WriteLimitBytes = DefaultWriteLimitBytes
	}
	if c.ImageLimitBytes <= 0 {
		c.ImageLimitBytes = DefaultImageLimitBytes
	}
	if c.ImageMaxEdge <= 0 {
		c.ImageMaxEdge = DefaultImageMaxEdge
	}
	if c.ImageSourceLimitBytes <= 0 {
		c.ImageSourceLimitBytes = DefaultImageSourceLimit
	}
	if c.SyncLimits == (workspace.Limits{}) {
		c.SyncLimits = workspace.DefaultLimits
	}
	if c.PatchDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		c.PatchDir = filepath.Join(dir, "e2b-mcp", "patches")
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	return c
}

// Deps are what the tools need from the server.
type Deps struct {
	Clients ClientSource
	// Egress configures every sandbox that comes alive (create, resume, fork, adoption); nil leaves E2B's
	// default (no limits, no rules) and sends no egress configuration at all.
	Egress egress.Source
	Store  state.Store
	// Previews, when set, makes e2b_get_url's links private: sandboxes are created with public traffic off and
	// the links go through this server's proxy. nil: links go straight to E2B's public address of the port.
	Previews Previews
	// SyncLinks, when set, makes the sync tools of a server without workspace roots answer with a link the user
	// runs `e2b-mcp sync` with (sync_link.go); nil: they are not available there.
	SyncLinks SyncLinks
	Config    Config
	// Limits are an owner's limits of the policy in force (read at every call, so a reloaded policy applies at
	// once); nil: no limits.
	Limits func(owner string) policy.Limits
	Logger *slog.Logger     // nil discards
	Now    func() time.Time // nil is time.Now
}
