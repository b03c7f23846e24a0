package wire

import "time"

// The control plane's answers, as E2B's API declares them (oapi-codegen: fields in alphabetical order, optional
// ones omitted when empty, nullable ones sent as null). The client decodes them, the emulator encodes them.

// Sandbox is E2B's answer to create, connect, resume and fork.
type Sandbox struct {
	Alias    string `json:"alias,omitempty"`
	ClientID string `json:"clientID"`
	// Domain is the base domain of the sandbox's traffic (e.g. e2b.app); null means the configured one.
	Domain          *string `json:"domain"`
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	EnvdVersion     string  `json:"envdVersion"`
	SandboxID       string  `json:"sandboxID"`
	TemplateID      string  `json:"templateID"`
	// TrafficAccessToken is what a request to a port of a sandbox created with allowPublicTraffic false carries;
	// null for a public one.
	TrafficAccessToken *string `json:"trafficAccessToken"`
}

// Sandbox states as E2B lists them.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// ListedSandbox is one entry of GET /v2/sandboxes.
type ListedSandbox struct {
	Alias       string            `json:"alias,omitempty"`
	ClientID    string            `json:"clientID"`
	CPUCount    int               `json:"cpuCount"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EndAt       time.Time         `json:"endAt"`
	EnvdVersion string            `json:"envdVersion"`
	MemoryMB    int               `json:"memoryMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	StartedAt   time.Time         `json:"startedAt"`
	State       string            `json:"state"` // StateRunning or StatePaused
	TemplateID  string            `json:"templateID"`
}

// What E2B does to a sandbox when its timeout runs out (SandboxLifecycle.OnTimeout).
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
)

// SandboxLifecycle says what E2B does when the sandbox times out.
type SandboxLifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"` // OnTimeoutKill or OnTimeoutPause
}

// SandboxDetail is GET /sandboxes/{id}: a running or a paused sandbox.
type SandboxDetail struct {
	ListedSandbox
	AllowInternetAccess *bool   `json:"allowInternetAccess"`
	Domain              *string `json:"domain"`
	EnvdAccessToken     string  `json:"envdAccessToken,omitempty"`
	// Lifecycle is nil only from an E2B older than lifecycles.
	Lifecycle *SandboxLifecycle `json:"lifecycle"`
}

// SnapshotInfo is E2B's answer to creating or listing snapshots. SnapshotID works as a templateID for create.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// Error is the body of every error answer of the control plane, and a failed fork's error.
type Error struct {
	// Code is the HTTP status.
	Code    int    `json:"code"`
	Message string `json:"message"`
	// ErrorCode, which some answers carry, names the error in words.
	ErrorCode string `json:"error_code,omitempty"`
}

// ForkResult is one entry of the answer to POST /sandboxes/{id}/fork: exactly one of the two is set.
type ForkResult struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}
