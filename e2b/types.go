package e2b

import "github.com/e2b-mcp/e2b-mcp/e2b/wire"

// NewSandbox is what CreateSandbox asks of E2B, sent as wire.NewSandboxV2 (or wire.NewSandbox to an E2B with
// only the v1 route).
type NewSandbox struct {
	TemplateID string
	Timeout    int // seconds; 0 means E2B's default (15 s)
	// AutoPause, AutoPauseMemory and AutoResume are what E2B does at the timeout; WithLifecycle sets them as
	// E2B's SDKs do. nil sends nothing: E2B's defaults (kill; a pause keeps memory; no resume on traffic).
	AutoPause           *bool
	AutoPauseMemory     *bool
	AutoResume          *AutoResume
	Secure              bool // v1 only: a v2 sandbox always is
	AllowInternetAccess *bool
	Metadata            map[string]string
	EnvVars             map[string]string
	// Network is the egress configuration; nil sends none (E2B's default: no limits, no rules).
	Network *Network
}

// v2 is req as the body of POST /v2/sandboxes.
func (req NewSandbox) v2() wire.NewSandboxV2 {
	body := wire.NewSandboxV2{TemplateID: &req.TemplateID, AutoPause: req.AutoPause,
		AutoPauseMemory: req.AutoPauseMemory, AutoResume: req.AutoResume,
		AllowInternetAccess: req.AllowInternetAccess, Metadata: req.Metadata, EnvVars: req.EnvVars,
		Network: req.Network}
	if req.Timeout != 0 {
		body.Timeout = new(int64(req.Timeout))
	}
	return body
}

// v1 is req as the body of POST /sandboxes.
func (req NewSandbox) v1() wire.NewSandbox {
	return wire.NewSandbox{NewSandboxV2: req.v2(), Secure: new(req.Secure)}
}

// AutoResume is create's autoResume (wire.AutoResume).
type AutoResume = wire.AutoResume

// What E2B does to a sandbox when its timeout runs out (SandboxLifecycle.OnTimeout).
const (
	OnTimeoutKill  = wire.OnTimeoutKill
	OnTimeoutPause = wire.OnTimeoutPause
)

// WithLifecycle returns req set to do onTimeout (OnTimeoutPause or OnTimeoutKill) at the timeout, as E2B's SDK
// 2.51 sends its lifecycle option: pause is autoPause true, the memory kept (autoPauseMemory left to E2B, whose
// default keeps it), and autoResume {"enabled": autoResume}; kill is autoPause false and no autoResume, which E2B
// takes only with a pause.
func (req NewSandbox) WithLifecycle(onTimeout string, autoResume bool) NewSandbox {
	pause := onTimeout == OnTimeoutPause
	req.AutoPause, req.AutoPauseMemory, req.AutoResume = &pause, nil, nil
	if pause {
		req.AutoResume = &AutoResume{Enabled: autoResume}
	}
	return req
}

// The control plane's answers are E2B's wire types (package wire), which the emulator writes.
type (
	Sandbox          = wire.Sandbox
	ListedSandbox    = wire.ListedSandbox
	SandboxDetail    = wire.SandboxDetail
	SandboxLifecycle = wire.SandboxLifecycle
	SnapshotInfo     = wire.SnapshotInfo
)

// Conn is what envd needs to reach sb; the client's domain applies when E2B named none.
func (c *Client) Conn(sb *Sandbox) SandboxConn {
	d := c.Domain()
	if sb.Domain != nil && *sb.Domain != "" {
		d = *sb.Domain
	}
	return SandboxConn{ID: sb.SandboxID, Domain: d, EnvdVersion: sb.EnvdVersion, AccessToken: sb.EnvdAccessToken}
}

// SandboxConn addresses one sandbox's envd. AccessToken is empty for sandboxes created without secure.
type SandboxConn struct {
	ID          string
	Domain      string
	EnvdVersion string
	AccessToken string
}

// Sandbox states as E2B lists them.
const (
	StateRunning = wire.StateRunning
	StatePaused  = wire.StatePaused
)

// ListQuery filters GET /v2/sandboxes. Empty States means running and paused.
type ListQuery struct {
	Metadata map[string]string
	States   []string
	Template string
	Order    string // "asc" or "desc"
	// PageSize is the limit per page (E2B's maximum and default is 100).
	PageSize int
}

// ForkRequest is what ForkSandbox asks of E2B (sent as wire.ForkRequest); zero asks for E2B's default.
type ForkRequest struct {
	Timeout int // seconds for each fork
	Count   int // 1..100
}

// ForkResult is one fork: exactly one of Sandbox and Error is set.
type ForkResult struct {
	Sandbox *Sandbox  `json:"sandbox,omitempty"`
	Error   *APIError `json:"-"`
}
