package wire

// The control plane's request bodies. Every member is a pointer, sent only when set: the client sends what it
// means, and the emulator tells a member left out from a zero one, as E2B's schema does. The create body is not
// here: the client's e2b.NewSandbox carries it, and the emulator reads it member by member to answer each refusal
// as E2B does.

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
