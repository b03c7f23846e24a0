package e2btest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
)

// RealEnvd is E2B's own envd daemon (shared/envd beside the repository: its start.sh runs one envd, one
// "sandbox", in namespaces of its own), booted as E2B's orchestrator boots a sandbox. Conformance tests run the
// same assertions against it and against the emulator.
type RealEnvd struct {
	// URL is where envd answers (plain HTTP on 127.0.0.1).
	URL string
	// AccessToken is the token /init set; every call but /health and signed /files needs it.
	AccessToken string
	// Version is envd's version, from /init's X-Envd-Version.
	Version string
	run     string
	// keeper is the shell that started envd and stops it when its standard input closes (see keeperScript).
	keeper      *exec.Cmd
	keeperStdin io.Closer
	stopOnce    sync.Once
}

// ErrNoRealEnvd is returned by StartRealEnvd when the real envd cannot run here; its text says why.
var ErrNoRealEnvd = errors.New("the real envd is not available")

// FindRealEnvd returns the directory of the real envd: $E2B_REAL_ENVD_DIR, else shared/envd beside the
// repository that holds the working directory (../shared/envd from its root).
func FindRealEnvd() (string, error) {
	if d := os.Getenv("E2B_REAL_ENVD_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "envd"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w: no go.mod above %s", ErrNoRealEnvd, wd)
		}
	}
}

// RealEnvdExpected reports whether the real envd is where FindRealEnvd looks. Where it is, a test that cannot run
// against it lacks what the suite provides (root), which CI must not pass as a skip (internal/optional's Missing);
// where it is not, the real half is a skip everywhere.
func RealEnvdExpected() bool {
	dir, err := FindRealEnvd()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "start.sh"))
	return err == nil
}

// RealEnvdAvailable returns the real envd's directory, or an error matching ErrNoRealEnvd that says why it
// cannot run here.
func RealEnvdAvailable() (string, error) {
	dir, err := FindRealEnvd()
	if err != nil {
		return "", err
	}
	start := filepath.Join(dir, "start.sh")
	if _, err := os.Stat(start); err != nil {
		return "", fmt.Errorf("%w: %s not found", ErrNoRealEnvd, start)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: %s needs root", ErrNoRealEnvd, start)
	}
	return dir, nil
}

// StartRealEnvd starts one real envd and boots it (POST /init with a random access token, default user "user",
// workdir /home/user, and envVars). The error matches ErrNoRealEnvd when the daemon is absent or this process
// may not start it (it needs root).
func StartRealEnvd(ctx context.Context, envVars map[string]string) (*RealEnvd, error) {
	return startRealEnvd(ctx, "", envVars)
}

// startRealEnvd is StartRealEnvd booting envd with accessToken (a random one when empty).
func startRealEnvd(ctx context.Context, accessToken string, envVars map[string]string) (*RealEnvd, error) {
	dir, err := RealEnvdAvailable()
	if err != nil {
		return nil, err
	}
	return startRealEnvdIn(ctx, dir, accessToken, envVars)
}

// startAttempts is how many times a start of envd is tried. start.sh finds its envd's pid by a walk of /proc
// under `set -e`: when another envd ends during the walk (tests start and stop envds side by side), reading the
// vanished entry fails and start.sh exits 2 without a word. That says nothing of the envd being started, so the
// start is tried again, in a fresh run directory.
const startAttempts = 3

// startRealEnvdIn is startRealEnvd with the daemon's directory dir.
func startRealEnvdIn(ctx context.Context, dir, accessToken string, envVars map[string]string) (*RealEnvd, error) {
	var r *RealEnvd
	var out []byte
	for attempt := 1; ; attempt++ {
		run, err := os.MkdirTemp(runBase, "envd-run.")
		if err != nil {
			return nil, err
		}
		r = &RealEnvd{run: run}
		if out, err = r.start(ctx, dir); err == nil {
			break
		} else if attempt == startAttempts || ctx.Err() != nil {
			return nil, err
		}
	}
	run := r.run
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	vars := map[string]string{}
	for _, f := range strings.Fields(lines[len(lines)-1]) {
		if k, v, ok := strings.Cut(f, "="); ok {
			vars[k] = v
		}
	}
	if r.URL = vars["ENVD_URL"]; r.URL == "" || vars["ENVD_RUN"] != run {
		r.Stop()
		return nil, fmt.Errorf("e2btest: start.sh printed no ENVD_URL, or another ENVD_RUN than %s: %q", run, out)
	}
	r.AccessToken = accessToken
	if r.AccessToken == "" {
		var tok [16]byte
		_, _ = rand.Read(tok[:])
		r.AccessToken = hex.EncodeToString(tok[:])
	}
	if err := r.init(ctx, envVars); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// init does what E2B's orchestrator does when a sandbox boots.
func (r *RealEnvd) init(ctx context.Context, envVars map[string]string) error {
	if envVars == nil {
		envVars = map[string]string{}
	}
	body, _ := json.Marshal(map[string]any{
		"accessToken": r.AccessToken, "envVars": envVars, "defaultUser": "user", "defaultWorkdir": "/home/user",
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/init", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("e2btest: envd /init: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("e2btest: envd /init: %s", resp.Status)
	}
	r.Version = resp.Header.Get("X-Envd-Version")
	return nil
}

// keeperScript starts an envd with start.sh ($1) in run directory $3, passing on what it prints, then closes its
// standard output, waits for its standard input to close and stops that envd with stop.sh ($2) and removes $3.
// The write end of its standard input is held by the test process alone (Go opens pipes close-on-exec, so no
// other child inherits it), so the kernel closes it when that process ends in any way: Stop, but also a test
// binary killed by go test's timeout, a SIGKILL or a crash. envd runs in a session of its own that no signal to
// the test process reaches; without the keeper it would outlive it. A start that is under way when the test
// process ends is finished and then stopped.
//
// start.sh runs in a mount namespace of its own (privateScript) in which /tmp and /home/user are directories of
// the run: start.sh gives envd the /tmp and /home/user it sees, and with the host's, every envd shared one /tmp
// and one home, as no two E2B sandboxes do, and tests at once overwrote each other's files there (the server
// keeps each command's output under names, exec-STEP and bg-PID, that every sandbox counts from the same start).
const keeperScript = `
unshare --mount --propagation private -- /bin/sh -c "$privateScript" private-mounts "$1" "$3" || {
	status=$?; "$2" "$3" >/dev/null 2>&1; rm -rf "$3"; exit $status; }
exec >/dev/null
cat >/dev/null
"$2" "$3" >/dev/null 2>&1
rm -rf "$3"
`

// privateScript mounts run directory $2's tmp on /tmp and its home (a copy of /etc/skel for the user "user",
// whom start.sh would otherwise make) on /home/user, and runs start.sh ($1). $2 is not under /tmp (see runBase):
// start.sh must find it at its path.
const privateScript = `set -e
id user >/dev/null 2>&1 || useradd -m -s /bin/bash user
mkdir -p "$2/tmp" "$2/home"
chmod 1777 "$2/tmp"
cp -a /etc/skel/. "$2/home/"
chown -R user:user "$2/home"
mount --bind "$2/tmp" /tmp
mount --bind "$2/home" /home/user
exec "$1"
`

// runBase is where envds' run directories are made: not under /tmp, which each envd gets a directory of its
// run as.
const runBase = "/var/tmp"

// start runs start.sh of the envd in dir under a keeper in r.run and returns what it printed.
func (r *RealEnvd) start(ctx context.Context, dir string) ([]byte, error) {
	cmd := exec.Command("/bin/sh", "-c", keeperScript, "envd-keeper",
		filepath.Join(dir, "start.sh"), filepath.Join(dir, "stop.sh"), r.run)
	cmd.Env = append(os.Environ(), "ENVD_RUN="+r.run, "privateScript="+privateScript)
	// A session of its own: a Ctrl-C to the terminal's process group, which ends the test, must not end the
	// keeper before it has stopped envd.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of this function's own rather than StdoutPipe, which must be read to its end before Wait.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer outR.Close()
	cmd.Stdout = outW
	err = cmd.Start()
	outW.Close()
	if err != nil {
		return nil, fmt.Errorf("e2btest: starting envd: %w", err)
	}
	r.keeper, r.keeperStdin = cmd, stdin
	printed := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		printed <- b
	}()
	select {
	case out := <-printed:
		if !bytes.Contains(out, []byte("ENVD_URL=")) {
			r.Stop()
			return nil, fmt.Errorf("e2btest: %s: %v: %s", filepath.Join(dir, "start.sh"), cmd.ProcessState,
				strings.TrimSpace(stderr.String()))
		}
		return out, nil
	case <-ctx.Done():
		r.Stop()
		return nil, fmt.Errorf("e2btest: starting envd: %w", ctx.Err())
	}
}

// Stop stops the envd and every process it started, and removes its run directory.
func (r *RealEnvd) Stop() {
	r.stopOnce.Do(func() {
		_ = r.keeperStdin.Close()
		_ = r.keeper.Wait()
	})
}

// RealEnvds backs every sandbox of an emulator with E2B's own envd when put in Options.Envd: one per sandbox,
// started (StartRealEnvd, booted with the sandbox's env vars) on its first envd request and stopped when it is
// killed, so that tests of the tools can run against the real daemon. It needs root and the daemon beside the
// repository; envd requests fail with 502 without them. Each sandbox has a /tmp and /home/user of its own (see
// keeperScript); pausing does not stop their processes (the sandbox is only unreachable while paused). Each
// emulator needs its own.
func RealEnvds() emulator.Envd { return &realEnvds{boxes: map[string]*realBox{}} }

type realEnvds struct {
	mu    sync.Mutex
	boxes map[string]*realBox
}

type realBox struct {
	once  sync.Once
	envd  *RealEnvd
	err   error
	proxy *httputil.ReverseProxy
}

// Serve forwards an envd request for sb to its real envd, starting it first if need be. The request's
// X-Access-Token is checked against the sandbox's own here (a sandbox without one is open), and the real envd
// gets its own token. A secure sandbox's envd is booted with the sandbox's token, as E2B boots it, so that
// envd checks the signatures of signed /files URLs with the key they were made with.
func (re *realEnvds) Serve(w http.ResponseWriter, r *http.Request, sb emulator.EnvdSandbox) error {
	token := sb.AccessToken
	re.mu.Lock()
	b := re.boxes[sb.ID]
	if b == nil {
		b = &realBox{}
		re.boxes[sb.ID] = b
	}
	re.mu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if b.envd, b.err = startRealEnvd(ctx, token, sb.EnvVars); b.err != nil {
			return
		}
		target, err := url.Parse(b.envd.URL)
		if err != nil {
			b.err = err
			return
		}
		b.proxy = httputil.NewSingleHostReverseProxy(target)
		b.proxy.FlushInterval = -1 // process streams go out event by event
	})
	if b.err != nil {
		return b.err
	}
	if token == "" || r.Header.Get("X-Access-Token") == token {
		r.Header.Set("X-Access-Token", b.envd.AccessToken)
	}
	b.proxy.ServeHTTP(w, r)
	return nil
}

// Stop stops the real envd of a sandbox, if it has one.
func (re *realEnvds) Stop(id string) {
	re.mu.Lock()
	b := re.boxes[id]
	delete(re.boxes, id)
	re.mu.Unlock()
	if b != nil {
		b.once.Do(func() {})
		if b.envd != nil {
			b.envd.Stop()
		}
	}
}

// Close stops every real envd.
func (re *realEnvds) Close() {
	re.mu.Lock()
	ids := make([]string, 0, len(re.boxes))
	for id := range re.boxes {
		ids = append(ids, id)
	}
	re.mu.Unlock()
	for _, id := range ids {
		re.Stop(id)
	}
}
