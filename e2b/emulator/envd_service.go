package emulator

import (
	"encoding/base64"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"
)

// envdService emulates envd for every sandbox of a Server: /health, /files, /envs and the Connect services
// process.Process and filesystem.Filesystem, answering as envd 0.6.13 does (docs/e2b.md, "Reaching
// envd", "envd's Connect RPC" and "envd's answers on the wire").
//
// freeze, thaw, stop and close never take Server.mu, so the control plane may call them with it held.
type envdService struct {
	srv *Server
	// isolation is how this host isolates sandbox processes. Its probe (bubblewrap making a namespace: tens of
	// milliseconds, more under load) runs in the background from the emulator's start, so that only what needs
	// its answer (a create, a process) waits for it.
	isolation func() isolation
	started   time.Time

	mu    sync.Mutex
	boxes map[string]*sandboxState // by sandbox ID
	// gone are the sandboxes stopped for good: a request that raced the kill must not bring them back.
	gone   map[string]bool
	closed bool
}

func newEnvdService(s *Server, probe func() isolation) *envdService {
	return &envdService{srv: s, isolation: sync.OnceValue(probe), started: time.Now(), boxes: map[string]*sandboxState{},
		gone: map[string]bool{}}
}

// now is the emulator's clock (Options.Now), for signature expiry and retained process ends.
func (e *envdService) now() time.Time {
	if e.srv != nil && e.srv.opts.Now != nil {
		return e.srv.opts.Now()
	}
	return time.Now()
}

// sandboxView is what envd needs of a sandbox record, copied under Server.mu.
type sandboxView struct {
	id, token, dir       string
	defaultUser          string
	defaultWorkdir       string
	envVars              map[string]string
	cutStreamAfterFrames int
}

func (e *envdService) view(sb *Sandbox) sandboxView {
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	v := sandboxView{
		id:             sb.ID,
		token:          sb.AccessToken,
		dir:            sb.Dir,
		defaultUser:    sb.DefaultUser,
		defaultWorkdir: sb.DefaultWorkdir,
		envVars:        maps.Clone(sb.EnvVars),
	}
	if v.defaultUser == "" {
		v.defaultUser = "user"
	}
	v.cutStreamAfterFrames = e.srv.hooks.StreamFrames()
	return v
}

// state is the envd-side state of a sandbox (its processes), made on first use; nil once the sandbox was stopped.
func (e *envdService) state(id string) *sandboxState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone[id] {
		return nil
	}
	st := e.boxes[id]
	if st == nil {
		st = newSandboxState(id)
		if e.closed {
			st.stopped = true
		}
		e.boxes[id] = st
	}
	return st
}

// authExcluded are the paths envd serves without X-Access-Token (/files checks signatures itself).
func authExcluded(methodPath string) bool {
	switch methodPath {
	case "GET/health", "GET/files", "POST/files", "POST/init":
		return true
	}
	return false
}

// serve answers one envd request for a running sandbox.
func (e *envdService) serve(w http.ResponseWriter, r *http.Request, sb *Sandbox) {
	if r.Method == http.MethodGet && r.URL.Path == "/health" {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	v := e.view(sb)
	if v.token != "" && !authExcluded(r.Method+r.URL.Path) && r.Header.Get("X-Access-Token") != v.token {
		envdJSONError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method "+
			"signing if supported")
		return
	}
	st := e.state(v.id)
	if st == nil {
		writeProxyError(w, v.id, "The sandbox was not found")
		return
	}
	if err := st.prepare(v.dir); err != nil {
		envdJSONError(w, http.StatusInternalServerError, "sandbox filesystem: "+err.Error())
		return
	}
	switch p := r.URL.Path; {
	case p == "/files" && r.Method == http.MethodGet:
		e.getFiles(w, r, v)
	case p == "/files" && r.Method == http.MethodPost:
		e.postFiles(w, r, v)
	case p == "/files":
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
	case p == "/envs" && r.Method == http.MethodGet:
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		vars := v.envVars
		if vars == nil {
			vars = map[string]string{}
		}
		_, _ = w.Write(append(pbJSON(vars), '\n'))
	case strings.HasPrefix(p, "/process.Process/") || strings.HasPrefix(p, "/filesystem.Filesystem/"):
		e.serveRPC(w, r, st, v, strings.TrimPrefix(p, "/"))
	default:
		http.NotFound(w, r)
	}
}

// rpcCall is one Connect call with what its handler needs.
type rpcCall struct {
	r    *http.Request
	msg  []byte
	st   *sandboxState
	view sandboxView
	user sandboxUser
	fs   *sandboxFS
	// timeout is Connect-Timeout-Ms (0: none); for Start it is also the process's lifetime.
	timeout time.Duration
}

// expand resolves a request path for the call's user (envd's ExpandAndResolve).
func (c *rpcCall) expand(p string) (string, *rpcError) {
	out, err := expandPath(p, c.user, c.view.defaultWorkdir)
	if err != nil {
		return "", &rpcError{Code: "invalid_argument", Message: err.Error()}
	}
	return out, nil
}

type unaryHandler func(*rpcCall) (any, *rpcError)

type streamHandler func(*rpcCall, *streamWriter) *rpcError

func (e *envdService) unaryHandlers() map[string]unaryHandler {
	unsupported := func(what string) unaryHandler {
		return func(*rpcCall) (any, *rpcError) {
			return nil, rpcErrorf("unimplemented", "%s is not supported by the emulator", what)
		}
	}
	return map[string]unaryHandler{
		"process.Process/List":                   e.procList,
		"process.Process/SendSignal":             e.procSendSignal,
		"process.Process/SendInput":              e.procSendInput,
		"process.Process/CloseStdin":             e.procCloseStdin,
		"process.Process/Update":                 unsupported("resizing a PTY (Process/Update)"),
		"process.Process/StreamInput":            unsupported("Process/StreamInput (use SendInput)"),
		"filesystem.Filesystem/Stat":             e.fsStat,
		"filesystem.Filesystem/ListDir":          e.fsListDir,
		"filesystem.Filesystem/MakeDir":          e.fsMakeDir,
		"filesystem.Filesystem/Move":             e.fsMove,
		"filesystem.Filesystem/Remove":           e.fsRemove,
		"filesystem.Filesystem/CreateWatcher":    unsupported("watching directories"),
		"filesystem.Filesystem/GetWatcherEvents": unsupported("watching directories"),
		"filesystem.Filesystem/RemoveWatcher":    unsupported("watching directories"),
	}
}

func (e *envdService) streamHandlers() map[string]streamHandler {
	return map[string]streamHandler{
		"process.Process/Start":   e.procStart,
		"process.Process/Connect": e.procConnect,
		"filesystem.Filesystem/WatchDir": func(*rpcCall, *streamWriter) *rpcError {
			return rpcErrorf("unimplemented", "watching directories is not supported by the emulator")
		},
	}
}

// serveRPC answers a Connect call as connect-go does, after envd's Basic-auth user check.
func (e *envdService) serveRPC(w http.ResponseWriter, r *http.Request, st *sandboxState,
	v sandboxView, procedure string) {
	streaming := isStreaming(procedure)
	uh := e.unaryHandlers()[procedure]
	sh := e.streamHandlers()[procedure]
	if uh == nil && sh == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	fail := func(rerr *rpcError) {
		if streaming {
			sw := newStreamWriter(w)
			_ = sw.end(rerr)
			return
		}
		writeUnaryError(w, rerr)
	}
	// envd's user check is an HTTP middleware in front of connect-go, so it comes first.
	user, rerr := authUser(r, v)
	if rerr != nil {
		fail(rerr)
		return
	}
	if !checkContentType(r, streaming) {
		w.Header().Set("Accept-Post", "application/json, application/connect+json")
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	if pv := r.Header.Get("Connect-Protocol-Version"); pv != "" && pv != "1" {
		fail(rpcErrorf("invalid_argument", "connect-protocol-version must be %q: got %q", "1", pv))
		return
	}
	timeout, rerr := connectTimeout(r.Header.Get("Connect-Timeout-Ms"))
	if rerr != nil {
		fail(rerr)
		return
	}
	msg, rerr := readRequest(r, streaming)
	if rerr != nil {
		fail(rerr)
		return
	}
	sfs := newSandboxFS(v.dir, e.started)
	defer sfs.close()
	c := &rpcCall{r: r, msg: msg, st: st, view: v, user: user, fs: sfs, timeout: timeout}
	if streaming {
		sw := newStreamWriter(w)
		sw.cutAfter = v.cutStreamAfterFrames
		if rerr := sh(c, sw); rerr != nil {
			_ = sw.end(rerr)
		}
		return
	}
	answer, rerr := uh(c)
	if rerr != nil {
		writeUnaryError(w, rerr)
		return
	}
	writeUnary(w, answer)
}

// authUser is envd's user of an RPC: Basic auth's user name (password ignored), else the sandbox's default user.
func authUser(r *http.Request, v sandboxView) (sandboxUser, *rpcError) {
	name, ok := basicUser(r.Header.Get("Authorization"))
	if !ok {
		u, known := lookupSandboxUser(v.defaultUser)
		if !known {
			return sandboxUser{}, rpcErrorf("unauthenticated", "invalid default user: '%s'", v.defaultUser)
		}
		return u, nil
	}
	u, known := lookupSandboxUser(name)
	if !known {
		return sandboxUser{}, rpcErrorf("unauthenticated", "invalid username: '%s'", name)
	}
	return u, nil
}

// basicUser reads the user name of "Basic base64(name:password)".
func basicUser(h string) (string, bool) {
	const prefix = "basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(h[len(prefix):])
	if err != nil {
		return "", false
	}
	name, _, ok := strings.Cut(string(raw), ":")
	return name, ok
}

// freeze stops a sandbox's processes while it is paused (SIGSTOP to each process group, deadlines held) and cuts
// its open streams, as pausing a VM breaks its connections.
func (e *envdService) freeze(sb *Sandbox) {
	if st := e.state(sb.ID); st != nil {
		st.freeze()
	}
}

// thaw continues a paused sandbox's processes.
func (e *envdService) thaw(sb *Sandbox) {
	if st := e.state(sb.ID); st != nil {
		st.thaw()
	}
}

// stop kills a sandbox's processes for good, cuts its streams, and waits (briefly) for the processes to end so
// that its directory can be removed.
func (e *envdService) stop(sb *Sandbox) {
	e.mu.Lock()
	st := e.boxes[sb.ID]
	delete(e.boxes, sb.ID)
	e.gone[sb.ID] = true
	e.mu.Unlock()
	if st != nil {
		st.stop()
	}
}

// reboot kills a sandbox's processes as stop does but keeps the sandbox: its next request finds none running,
// as after a resume from a filesystem-only snapshot.
func (e *envdService) reboot(sb *Sandbox) {
	e.mu.Lock()
	st := e.boxes[sb.ID]
	delete(e.boxes, sb.ID)
	e.mu.Unlock()
	if st != nil {
		st.stop()
	}
}

// close stops every sandbox's processes; the Server calls it when it closes.
func (e *envdService) close() {
	e.mu.Lock()
	e.closed = true
	boxes := e.boxes
	e.boxes = map[string]*sandboxState{}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, st := range boxes {
		wg.Go(st.stop)
	}
	wg.Wait()
}
