package e2b

import (
	"context"
	"io"
	"time"
)

// Envd talks to the envd daemon of one sandbox. Make one with Client.Envd; it is cheap and safe for concurrent use.
type Envd struct {
	client *Client
	conn   SandboxConn
	user   string
}

// Envd returns a handle on a sandbox's envd. With envd >= 0.4.0 no user is sent unless WithUser names one,
// and envd uses the template's default user.
func (c *Client) Envd(sb SandboxConn) *Envd { return &Envd{client: c, conn: sb} }

// WithUser returns a copy of e that acts as the Linux user name (Basic auth on RPC, username= on /files).
func (e *Envd) WithUser(name string) *Envd { c := *e; c.user = name; return &c }

// ProcessConfig is the process to start.
type ProcessConfig struct {
	Cmd  string
	Args []string
	Envs map[string]string
	Cwd  string // empty: the template's workdir or the user's home
}

// StartOptions are the options of Process/Start.
type StartOptions struct {
	Process ProcessConfig
	// Timeout is sent as Connect-Timeout-Ms: envd kills the process when it runs out. 0 means no limit.
	Timeout time.Duration
	// Stdin keeps stdin open for SendStdin; false attaches /dev/null.
	Stdin bool
	Tag   string
	// KeepaliveInterval is sent as Keepalive-Ping-Interval; 0 means 50 s as the SDKs do.
	KeepaliveInterval time.Duration
}

// EventKind says what a ProcessEvent carries.
type EventKind int

// The kinds of process event, in the order a stream delivers them: one start, data and keepalives, one end.
const (
	EventStart EventKind = iota + 1
	EventStdout
	EventStderr
	EventPTY
	EventKeepalive
	EventEnd
)

// ProcessEvent is one message of a Start or Connect stream.
type ProcessEvent struct {
	Kind EventKind
	PID  uint32      // EventStart
	Data []byte      // EventStdout, EventStderr, EventPTY; valid only during the callback
	End  *ProcessEnd // EventEnd
}

// ProcessEnd is how a process ended. ExitCode is -1 when it was killed by a signal.
type ProcessEnd struct {
	ExitCode int
	Exited   bool
	Status   string
	Error    string
}

// Start runs a process and calls onEvent for each event as it arrives, returning when the stream ends.
// Cancelling ctx closes the stream; envd does not kill the process for that (see RunCommand).
func (e *Envd) Start(ctx context.Context, opts StartOptions, onEvent func(ProcessEvent)) (ProcessEnd, error) {
	return ProcessEnd{}, errUnbuilt
}

// CommandOptions are the options of RunCommand.
type CommandOptions struct {
	Cwd     string
	Envs    map[string]string
	Timeout time.Duration // envd kills the command at this deadline; 0 = no limit
	// OnStart is called with the pid as soon as envd reports it.
	OnStart func(pid uint32)
	// OnOutput is called with each stdout/stderr chunk as it arrives (data valid only during the call).
	OnOutput func(kind EventKind, data []byte)
}

// CommandResult is how a command ended.
type CommandResult struct {
	PID uint32
	ProcessEnd
	// TimedOut is true when envd killed the command because Timeout ran out.
	TimedOut bool
}

// RunCommand runs a command with `/bin/bash -l -c` as E2B's SDKs do. If ctx is cancelled while the command runs,
// the process is killed in the sandbox (SIGKILL), since envd would otherwise keep it running.
func (e *Envd) RunCommand(ctx context.Context, command string, opts CommandOptions) (CommandResult, error) {
	return CommandResult{}, errUnbuilt
}

// Signal is a signal envd can send (only SIGTERM and SIGKILL are supported by envd).
type Signal string

// The signals envd supports.
const (
	SIGTERM Signal = "SIGNAL_SIGTERM"
	SIGKILL Signal = "SIGNAL_SIGKILL"
)

// ProcessInfo is one entry of Process/List.
type ProcessInfo struct {
	PID    uint32
	Tag    string
	Config ProcessConfig
}

// SendSignal signals a process; an unknown pid matches ErrNotFound.
func (e *Envd) SendSignal(ctx context.Context, pid uint32, sig Signal) error { return errUnbuilt }

// SendStdin writes to a process's stdin.
func (e *Envd) SendStdin(ctx context.Context, pid uint32, data []byte) error { return errUnbuilt }

// CloseStdin closes a process's stdin (envd >= 0.5.2).
func (e *Envd) CloseStdin(ctx context.Context, pid uint32) error { return errUnbuilt }

// ListProcesses lists running processes.
func (e *Envd) ListProcesses(ctx context.Context) ([]ProcessInfo, error) { return nil, errUnbuilt }

// ConnectProcess reattaches to a running process's stream (output from before is not replayed).
func (e *Envd) ConnectProcess(ctx context.Context, pid uint32, onEvent func(ProcessEvent)) (ProcessEnd, error) {
	return ProcessEnd{}, errUnbuilt
}

// FileType is envd's FileType enum name.
type FileType string

// The file types envd reports.
const (
	FileTypeFile      FileType = "FILE_TYPE_FILE"
	FileTypeDirectory FileType = "FILE_TYPE_DIRECTORY"
	FileTypeSymlink   FileType = "FILE_TYPE_SYMLINK"
)

// EntryInfo describes a file (filesystem.EntryInfo). For a symlink, Type and Mode describe the target.
type EntryInfo struct {
	Name          string
	Type          FileType
	Path          string
	Size          int64
	Mode          uint32 // permission bits only
	Permissions   string
	Owner, Group  string
	ModifiedTime  time.Time
	SymlinkTarget string
	Metadata      map[string]string
}

// Stat describes a path; a missing path matches ErrNotFound.
func (e *Envd) Stat(ctx context.Context, path string) (EntryInfo, error) {
	return EntryInfo{}, errUnbuilt
}

// ListDir lists a directory to depth (0 is treated as 1).
func (e *Envd) ListDir(ctx context.Context, path string, depth int) ([]EntryInfo, error) {
	return nil, errUnbuilt
}

// MakeDir creates a directory and its parents; created is false when it already existed.
func (e *Envd) MakeDir(ctx context.Context, path string) (created bool, err error) {
	return false, errUnbuilt
}

// Move renames source to destination.
func (e *Envd) Move(ctx context.Context, source, destination string) (EntryInfo, error) {
	return EntryInfo{}, errUnbuilt
}

// Remove deletes a file or a directory tree.
func (e *Envd) Remove(ctx context.Context, path string) error { return errUnbuilt }

// DownloadOptions select part of a file. Length 0 means to the end.
type DownloadOptions struct {
	Offset, Length int64
}

// Download streams a file's bytes (GET /files, Range for partial reads). The caller closes the reader.
// size is the whole file's size when envd says it (-1 otherwise).
func (e *Envd) Download(ctx context.Context, path string, opts DownloadOptions) (r io.ReadCloser, size int64, err error) {
	return nil, 0, errUnbuilt
}

// WriteInfo is envd's answer for one uploaded file.
type WriteInfo struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Upload streams r to path (POST /files), creating parent directories and overwriting an existing file.
func (e *Envd) Upload(ctx context.Context, path string, r io.Reader) (WriteInfo, error) {
	return WriteInfo{}, errUnbuilt
}

// Health reports whether envd answers (GET /health 204); a stopped sandbox matches ErrSandboxGone.
func (e *Envd) Health(ctx context.Context) error { return errUnbuilt }
