package wire

// The control plane's request bodies. Every member but a map is a pointer, sent only when set: the client sends
// what it means, and the emulator tells a member left out from a zero one, as E2B's schema does.

// NewSandboxV2 is the body of POST /v2/sandboxes, as E2B's SDKs send it. The members E2B has that the code does
// not use (mcp, iam, volumeMounts) are left out, so the emulator refuses them.
type NewSandboxV2 struct {
	TemplateID *string `json:"templateID,omitempty"`
	// Timeout is in seconds; left out, E2B's default (15 s).
	Timeout *int64 `json:"timeout,omitempty"`
	// AutoPause, AutoPauseMemory and AutoResume are what E2B does at the timeout; left out, E2B's defaults: kill,
	// a pause keeps memory, no resume on traffic.
	AutoPause           *bool       `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool       `json:"autoPauseMemory,omitempty"`
	AutoResume          *AutoResume `json:"autoResume,omitempty"`
	AllowInternetAccess *bool       `json:"allow_internet_access,omitempty"` // snake_case, as E2B spells it
	// Metadata and EnvVars are sent always, empty or not, as the SDKs send them.
	Metadata map[string]string `json:"metadata"`
	EnvVars  map[string]string `json:"envVars"`
	Network  *Network          `json:"network,omitempty"`
}

// NewSandbox is the body of the v1 create, POST /sandboxes: NewSandboxV2 and secure (a v2 sandbox always is).
type NewSandbox struct {
	NewSandboxV2
	Secure *bool `json:"secure,omitempty"`
}

// TimeoutRequest is the body of set-timeout, resume and the v1 connect (ConnectSandbox, SandboxTimeoutRequest,
// ResumedSandbox): the sandbox's timeout in seconds from now.
type TimeoutRequest struct {
	Timeout *int64 `json:"timeout,omitempty"`
}

// ConnectV2Request is the body of POST /v2/sandboxes/{id}/connect (ConnectSandboxV2).
type ConnectV2Request struct {
	TimeoutRequest
	// Memory says which snapshot a resume starts from: the memory one (true) or the filesystem one.
	Memory *bool `json:"memory,omitempty"`
}

// PauseRequest is the body of POST /sandboxes/{id}/pause: Memory false pauses the filesystem only, and a resume
// then boots the sandbox cold.
type PauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// SnapshotRequest is the body of POST /sandboxes/{id}/snapshots, which may name the snapshot.
type SnapshotRequest struct {
	Name *string `json:"name,omitempty"`
}

// ForkRequest is the body of POST /sandboxes/{id}/fork: how many forks (1..100, default 1), each with the
// timeout in seconds (default 15).
type ForkRequest struct {
	Timeout *int64 `json:"timeout,omitempty"`
	Count   *int64 `json:"count,omitempty"`
}

// AutoResume is create's autoResume: whether traffic reaching a paused sandbox resumes it (with autoPause only).
type AutoResume struct {
	Enabled bool `json:"enabled"`
}
