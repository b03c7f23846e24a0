// Package emulator is an emulator of E2B, the local backend of `serve --backend local` and the ground of the tests: the
// control-plane REST API and each sandbox's envd on one HTTP address, answering as E2B does (docs/e2b.md). Sandboxes
// are real: commands run as real processes isolated with bubblewrap, each sandbox with its own /home/user and /tmp and
// no network. What only tests need (fault injection, a request log, E2B's own envd behind the sandboxes) is package
// e2btest, which plugs into Options.Hooks and Options.Envd.
//
// The package must not import the e2b client package: the client's own tests import this one.
package emulator

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// Server is a running emulator. Point e2b.Config.APIURL and SandboxURL at URL().
type Server struct {
	opts   Options
	http   *http.Server
	url    string
	served chan struct{}  // closed when http.Serve has returned
	mux    *http.ServeMux // control-plane routes
	envd   *envdService
	egress *egressProxies
	hooks  Hooks // never nil: Options.Hooks or noHooks

	// root holds every sandbox's and snapshot's directory; removeRoot says Close removes it (a temp dir).
	root       string
	removeRoot bool

	stopTick  chan struct{}
	tickDone  chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	// ran is the running time of each team's ended runs (create or resume to pause, timeout or kill), killed
	// sandboxes' included: what E2B bills (see RunningTime).
	ran       map[string]time.Duration
	snapshots map[string]*snapshot
	snapSeq   uint64
	closed    bool
	// handlers counts the requests being answered, so that Close can wait for them; Add is called with mu held
	// and only while !closed, so that none comes after Close's Wait has begun.
	handlers sync.WaitGroup

	// codeInterpreters starts the code-interpreter servers of sandboxes (Options.CodeInterpreter).
	codeInterpreters codeInterpreters
	// codeInterpreterCheck is Options.CodeInterpreterCheck run once (nil without one).
	codeInterpreterCheck func() error
}

// Options configure an emulator.
type Options struct {
	// Addr is the host:port to listen on; default "127.0.0.1:0" (a free loopback port).
	Addr string
	// APIKeys are the accepted X-API-Key values; each is its own team, which sees only its own sandboxes.
	// Empty means any key of the form e2b_<hex> is accepted (each still its own team), unless AcceptKey is set.
	APIKeys []string
	// AcceptKey, when set, decides which keys of the form e2b_<hex> are let in besides APIKeys: the local
	// backend's emulator accepts only the keys its server made, so that nothing else on the machine can use it.
	AcceptKey func(key string) bool
	// Dir holds the sandboxes' filesystems; empty means a temporary directory removed by Close.
	Dir string
	// EnvdVersion is what sandboxes report; default "0.6.13".
	EnvdVersion string
	// Domain is the domain named in create/connect answers; default "e2b.local".
	Domain string
	// Now is the emulator's clock for sandbox timeouts; default time.Now.
	Now func() time.Time
	// MaxTimeoutHours is the team's longest allowed sandbox timeout, as E2B's plans have; default 24.
	MaxTimeoutHours int
	// ExpiryInterval is how often timeouts are applied in the background; default 250 ms, negative disables
	// the ticker (tests then call Expire).
	ExpiryInterval time.Duration
	// Templates are template IDs accepted by create besides "base".
	Templates []string
	// Hosts maps domain names to IP addresses for the sandboxes' egress proxy, as /etc/hosts would: tests put
	// a server of this machine behind a domain this way. Only mapped names may reach this machine's addresses.
	Hosts map[string]string
	// V1Only leaves out the v2 routes of create and connect (POST /v2/sandboxes, POST /v2/sandboxes/{id}/connect),
	// as on an E2B that predates them: they answer 404 page not found.
	V1Only bool
	// NoLifecycle refuses creates that name autoPause, autoPauseMemory or autoResume (400, the property is
	// unsupported), as a self-hosted E2B whose API predates them does.
	NoLifecycle bool
	// Hooks, when set, see every request and may make the emulator misbehave (e2btest's faults and recorder).
	Hooks Hooks
	// Envd, when set, serves every sandbox's envd in place of the emulated one (e2btest's real envd).
	Envd Envd
	// CodeInterpreter offers E2B's code-interpreter template (code-interpreter-v1), whose sandboxes answer on
	// port 49999 as E2B's code-interpreter server does (see codeinterpreter.go); CodeInterpreterAvailable says
	// whether this machine can run it.
	CodeInterpreter bool
	// CodeInterpreterCheck, when set, offers the template where it answers nil (CodeInterpreterAvailable says
	// so for this machine). It runs once, in the background from New on, and a create of the template waits for
	// its answer, so that a slow check (Python importing Jupyter takes half a second) delays no other request.
	CodeInterpreterCheck func() error

	// probeIsolation finds how this host isolates sandbox processes (probeIsolation); tests replace it.
	probeIsolation func() isolation
}

// Sandbox is the emulator's record of one sandbox. Fields are guarded by Server.mu.
type Sandbox struct {
	ID          string
	TemplateID  string
	Alias       string
	Team        string // the API key that created it
	Metadata    map[string]string
	EnvVars     map[string]string
	State       string // "running", "paused"
	Secure      bool
	AccessToken string
	// TrafficToken is what requests to the sandbox's ports must carry when it was created with network
	// allowPublicTraffic false (header e2b-traffic-access-token); "" when its ports are public.
	TrafficToken string
	EnvdVersion  string
	// AutoPause pauses the sandbox at its timeout instead of killing it; AutoPauseMemory keeps its memory then
	// (else only its files: its processes are lost); AutoResume resumes it, paused, when envd traffic reaches it.
	AutoPause, AutoPauseMemory, AutoResume bool
	// Timeout is the create's timeout, which an automatic resume gives the sandbox again.
	Timeout time.Duration
	// AllowInternetAccess is the create request's allow_internet_access (nil when it was not sent).
	AllowInternetAccess *bool
	// Network is the egress configuration (create's network, replaced by PUT .../network); nil: none.
	Network   *wire.Network
	StartedAt time.Time
	EndAt     time.Time
	// Dir is the sandbox's filesystem on the host: Dir/home is /home/user and Dir/tmp is /tmp inside it.
	Dir string
	// DefaultUser and DefaultWorkdir are what envd uses when a request names none ("user", "/home/user").
	DefaultUser    string
	DefaultWorkdir string

	// lifecycle serialises state changes of this sandbox (pause, resume, kill, snapshot, fork), so that envd's
	// freeze/thaw/stop, which run without Server.mu, are never interleaved for one sandbox.
	lifecycle *sync.Mutex
}

// The states a sandbox can be in.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

type snapshot struct {
	ID        string // the snapshotID as answered: "<templateID>:default" or "<team-slug>/<name>:<tag>"
	Names     []string
	Team      string
	SandboxID string
	Dir       string // a copy of the sandbox's filesystem
	EnvVars   map[string]string
	// TemplateID is the identifier part of ID (without the tag); creates may name either.
	TemplateID string
	// BaseTemplateID is the template the snapshotted sandbox was created from.
	BaseTemplateID string
	CreatedAt      time.Time
	seq            uint64 // creation order, for listing snapshots created within one clock tick

	// mu is held for reading while the snapshot's Dir is copied into a new sandbox and for writing while Dir is
	// removed, so that a create from a snapshot being deleted fails cleanly instead of copying half a tree.
	mu *sync.RWMutex
}

// envdHostPattern matches the per-sandbox host form <port>-<sandboxID>.<domain>.
var envdHostPattern = regexp.MustCompile(`^(\d+)-([a-z0-9]+)\.`)

// New starts an emulator listening on Options.Addr. It fails, having started nothing, when the address cannot be
// bound. Whether sandbox processes can be isolated here is found in the background (Isolated says); where they
// cannot, creates answer why, since a sandbox whose commands ran on the host unisolated would not be a sandbox.
func New(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.EnvdVersion == "" {
		opts.EnvdVersion = "0.6.13"
	}
	if opts.Domain == "" {
		opts.Domain = "e2b.local"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxTimeoutHours <= 0 {
		opts.MaxTimeoutHours = 24
	}
	if opts.ExpiryInterval == 0 {
		opts.ExpiryInterval = 250 * time.Millisecond
	}
	if opts.CodeInterpreter {
		opts.Templates = append(slices.Clone(opts.Templates), codeInterpreterTemplate)
	}
	s := &Server{
		opts:      opts,
		hooks:     opts.Hooks,
		sandboxes: make(map[string]*Sandbox),
		ran:       make(map[string]time.Duration),
		snapshots: make(map[string]*snapshot),
	}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "e2b-emulator-")
		if err != nil {
			return nil, fmt.Errorf("emulator: temp dir: %w", err)
		}
		s.root, s.removeRoot = dir, true
	} else {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("emulator: sandbox dir: %w", err)
		}
		s.root = opts.Dir
	}
	if s.hooks == nil {
		s.hooks = noHooks{}
	}
	s.mux = s.controlPlaneRoutes()
	if opts.probeIsolation == nil {
		opts.probeIsolation = probeIsolation
	}
	s.envd = newEnvdService(s, opts.probeIsolation)
	if opts.CodeInterpreterCheck != nil {
		s.codeInterpreterCheck = sync.OnceValue(opts.CodeInterpreterCheck)
	}
	s.egress = newEgressProxies(s)
	fail := func(err error) (*Server, error) {
		if s.removeRoot {
			os.RemoveAll(s.root)
		}
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fail(fmt.Errorf("emulator: listening on %s: %w", opts.Addr, err))
	}
	s.url = "http://" + ln.Addr().String()
	// The probes of this host start now, in the background: what waits for them is a request that needs them.
	go s.envd.isolation()
	if s.codeInterpreterCheck != nil {
		go s.codeInterpreterCheck()
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		_ = s.http.Serve(ln) // http.ErrServerClosed once Close has closed it
	}()
	if opts.ExpiryInterval > 0 {
		s.stopTick, s.tickDone = make(chan struct{}), make(chan struct{})
		go s.expireLoop(opts.ExpiryInterval)
	}
	return s, nil
}

// Isolated says why sandbox processes cannot be isolated on this host (nil when they can), once the probe that
// New started has found out.
func (s *Server) Isolated() error { return s.envd.isolation().err }

// codeInterpreterOffered says whether creates of the code-interpreter template are served, waiting for
// Options.CodeInterpreterCheck's answer where that decides.
func (s *Server) codeInterpreterOffered() bool {
	return s.opts.CodeInterpreter || s.codeInterpreterCheck != nil && s.codeInterpreterCheck() == nil
}

// URL is the emulator's base URL, for both the control plane and envd (which is routed by headers or host).
func (s *Server) URL() string { return s.url }

// Close kills every sandbox's processes, stops the server, waits for the requests it was answering and removes
// the temporary directory.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.stopTick != nil {
			close(s.stopTick)
			<-s.tickDone
		}
		s.mu.Lock()
		s.closed = true
		all := make([]*Sandbox, 0, len(s.sandboxes))
		for _, sb := range s.sandboxes {
			all = append(all, sb)
		}
		s.mu.Unlock()
		// Processes go first: streams of running commands end with them, so that the HTTP server's Close, which
		// waits for every outstanding request, does not wait for a command that would never exit.
		for _, sb := range all {
			sb.lifecycle.Lock()
			s.envd.stop(sb)
			sb.lifecycle.Unlock()
		}
		s.envd.close()
		s.egress.close()
		if s.opts.Envd != nil {
			s.opts.Envd.Close()
		}
		// Closing the connections ends the requests still open (a watch, a held create): their contexts are
		// done and their writes fail.
		_ = s.http.Close()
		<-s.served
		s.handlers.Wait()
		if s.removeRoot {
			_ = removeTree(s.root)
		}
	})
}

// now is the emulator's clock, in UTC as E2B answers.
func (s *Server) now() time.Time { return s.opts.Now().UTC().Round(0) }

// ServeHTTP routes a request to envd when it is addressed to a sandbox (host form or routing headers), else to
// the control plane, as E2B's edge does. Every request passes Hooks.Arrive first.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeProxyError(w, "", "The emulator is closed")
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()
	s.hooks.Arrive(r)

	id, port := "", ""
	if m := envdHostPattern.FindStringSubmatch(r.Host); m != nil {
		port, id = m[1], m[2]
	} else if h := r.Header.Get("E2b-Sandbox-Id"); h != "" {
		id, port = h, r.Header.Get("E2b-Sandbox-Port")
	} else if r.URL.Path == "/files" && r.URL.Query().Has("signature") {
		if id = s.signedBy(r); id == "" {
			envdJSONError(w, http.StatusUnauthorized, "invalid signature")
			return
		}
	}
	if id == "" {
		if s.hooks.ControlPlane(w, r) {
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	if port != "" && port != strconv.Itoa(envdPort) {
		s.servePort(w, r, id, port)
		return
	}
	s.serveEnvd(w, r, id)
}

// signedBy finds the sandbox whose envd access token signed a /files URL that names no sandbox. A signed URL is
// made for a browser, which cannot send routing headers: E2B puts the sandbox in the host name, and a client
// pointed at one envd (E2B_SANDBOX_URL) makes its links with that envd's address. The emulator is every envd at
// one address, so it routes such a link to the sandbox it was signed for; its envd then checks the signature
// (expiry included) as usual. "" when no sandbox's token signed it.
func (s *Server) signedBy(r *http.Request) string {
	p, err := parseFilesParams(r)
	if err != nil || p.signature == nil {
		return ""
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	user := ""
	if p.username != nil {
		user = *p.username
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sb := range s.sandboxes {
		if sb.AccessToken != "" && subtle.ConstantTimeCompare([]byte(fileSignature(p.path, op, user, sb.AccessToken,
			p.expiration)), []byte(*p.signature)) == 1 {
			return id
		}
	}
	return ""
}

// envdPort is the port envd listens on in every sandbox; the edge routes only this port to the emulated envd.
const envdPort = 49983

// serveEnvd answers a request for a sandbox's envd: the edge proxy's 502 when the sandbox is not running
// (paused, killed, timed out or never existed), else envd itself. Team isolation does not apply: envd has tokens.
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, id string) {
	sb := s.awake(id)
	if sb == nil {
		writeProxyError(w, id, "The sandbox was not found")
		return
	}
	if s.opts.Envd != nil {
		v := s.envd.view(sb)
		if err := s.opts.Envd.Serve(w, r, EnvdSandbox{ID: sb.ID, AccessToken: v.token, EnvVars: v.envVars}); err != nil {
			envdJSONError(w, http.StatusBadGateway, "emulator: the envd of this sandbox: "+err.Error())
		}
		return
	}
	s.envd.serve(w, r, sb)
}

// awake is the sandbox that traffic for id reaches: a running one, or a paused one that autoResume resumes first;
// nil when there is none (paused, killed, timed out or never existed).
func (s *Server) awake(id string) *Sandbox {
	s.mu.Lock()
	sb := s.sandboxes[id]
	running := sb != nil && sb.State == StateRunning && !s.closed
	wake := sb != nil && sb.State == StatePaused && sb.AutoResume && !s.closed
	var team string
	var timeout time.Duration
	if wake {
		team, timeout = sb.Team, sb.Timeout
	}
	s.mu.Unlock()
	if wake {
		// autoResume: traffic to a paused sandbox resumes it, for its create's timeout, before it is served, as
		// E2B's edge does.
		_, _, e := s.resume(team, id, timeout, false)
		running = e == nil
	}
	if !running {
		return nil
	}
	return sb
}

// writeProxyError writes the edge proxy's JSON answer for a sandbox it cannot reach, keys in the proxy's order.
func writeProxyError(w http.ResponseWriter, id, message string) {
	writeEdgeError(w, http.StatusBadGateway, id, message)
}

// endRunLocked adds the run of a running sandbox that ends at end (or at its timeout, when that came first) to its
// team's running time. s.mu is held.
func (s *Server) endRunLocked(sb *Sandbox, end time.Time) {
	if sb.EndAt.Before(end) {
		end = sb.EndAt
	}
	if end.After(sb.StartedAt) {
		s.ran[sb.Team] += end.Sub(sb.StartedAt)
	}
}

// RunningTime is the time the sandboxes of team (the API key that created them) have run, as E2B bills it: every
// run from a create or resume to a pause, a kill or the timeout, killed sandboxes' included, and the runs going
// on up to now.
func (s *Server) RunningTime(team string) time.Duration {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.ran[team]
	for _, sb := range s.sandboxes {
		if sb.Team == team && sb.State == StateRunning {
			end := now
			if sb.EndAt.Before(end) {
				end = sb.EndAt
			}
			if end.After(sb.StartedAt) {
				total += end.Sub(sb.StartedAt)
			}
		}
	}
	return total
}

// Sandbox returns a copy of a sandbox's record (running or paused).
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return Sandbox{}, false
	}
	return sb.copy(), true
}

// Sandboxes returns copies of every sandbox's record, of every team, ordered by ID.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	out := make([]Sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		out = append(out, sb.copy())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Sandbox) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (sb *Sandbox) copy() Sandbox {
	c := *sb
	c.Metadata = cloneMap(sb.Metadata)
	c.EnvVars = cloneMap(sb.EnvVars)
	if sb.AllowInternetAccess != nil {
		v := *sb.AllowInternetAccess
		c.AllowInternetAccess = &v
	}
	c.Network = sb.Network.Clone()
	c.lifecycle = nil
	return c
}

// Vanish makes a sandbox disappear before its timeout, as when E2B loses it: its processes are killed and its
// filesystem removed; the control plane answers 404 and the edge 502 from then on. It reports whether it existed.
func (s *Server) Vanish(id string) bool {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	s.mu.Unlock()
	if !ok {
		return false
	}
	return s.kill(sb)
}

// Expire applies timeouts now: every running sandbox whose end time has passed on the emulator's clock is paused
// (when it was created with autoPause) or killed. It returns the IDs it acted on.
func (s *Server) Expire() []string {
	now := s.now()
	s.mu.Lock()
	var due []*Sandbox
	for _, sb := range s.sandboxes {
		if sb.State == StateRunning && !sb.EndAt.After(now) {
			due = append(due, sb)
		}
	}
	s.mu.Unlock()
	var acted []string
	for _, sb := range due {
		if s.expireOne(sb, now) {
			acted = append(acted, sb.ID)
		}
	}
	slices.Sort(acted)
	return acted
}

func (s *Server) expireOne(sb *Sandbox, now time.Time) bool {
	sb.lifecycle.Lock()
	s.mu.Lock()
	current := s.sandboxes[sb.ID] == sb && sb.State == StateRunning && !sb.EndAt.After(now)
	autoPause, memory := sb.AutoPause, sb.AutoPauseMemory
	if current && autoPause {
		s.endRunLocked(sb, sb.EndAt)
		sb.State = StatePaused
		sb.EndAt = now
	}
	s.mu.Unlock()
	if !current {
		sb.lifecycle.Unlock()
		return false
	}
	if autoPause {
		if memory {
			s.envd.freeze(sb)
		} else {
			// A filesystem-only snapshot: the resumed sandbox boots afresh, without the processes it had.
			s.envd.reboot(sb)
		}
		sb.lifecycle.Unlock()
		return true
	}
	sb.lifecycle.Unlock()
	return s.kill(sb)
}

func (s *Server) expireLoop(every time.Duration) {
	defer close(s.tickDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopTick:
			return
		case <-t.C:
			s.Expire()
		}
	}
}

// kill removes a sandbox (running or paused): it disappears from the records at once, then its processes are
// stopped and its filesystem removed. It reports whether this call removed it.
func (s *Server) kill(sb *Sandbox) bool {
	sb.lifecycle.Lock()
	defer sb.lifecycle.Unlock()
	s.mu.Lock()
	current := s.sandboxes[sb.ID] == sb
	if current {
		if sb.State == StateRunning {
			s.endRunLocked(sb, s.now())
		}
		delete(s.sandboxes, sb.ID)
	}
	s.mu.Unlock()
	if !current {
		return false
	}
	s.envd.stop(sb)
	s.egress.stop(sb.ID)
	if s.opts.Envd != nil {
		s.opts.Envd.Stop(sb.ID)
	}
	_ = removeTree(sb.Dir)
	return true
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
