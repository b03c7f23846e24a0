package emulator

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
)

// E2B's code-interpreter template: a Jupyter kernel behind a small HTTP server on port 49999 of each sandbox.
// With Options.CodeInterpreter the emulator offers the template, and runs in each of its sandboxes its own
// server (codeinterpreter.py: the same requests and answers, on kernels started by the host's jupyter_client),
// started when the port is first asked for, as E2B's template has it running from the sandbox's start.
const (
	codeInterpreterTemplate = "code-interpreter-v1"
	codeInterpreterPort     = 49999
	// codeInterpreterStartup bounds the server's start (its first kernel's included).
	codeInterpreterStartup = 60 * time.Second
)

//go:embed codeinterpreter.py
var codeInterpreterServer string

// codeInterpreterPython is the system's Python, where the distribution's Jupyter packages are (another python3
// on PATH, a pyenv's, need not have them, and is not in the sandbox).
const codeInterpreterPython = "/usr/bin/python3"

// codeInterpreterModules are what the server imports beyond Python's standard library.
var codeInterpreterModules = []string{"jupyter_client", "ipykernel"}

// CodeInterpreterAvailable says whether this machine can run the code-interpreter template's server: /usr/bin/python3
// with jupyter_client and ipykernel (Debian: python3-jupyter-server python3-ipykernel); the error says what is missing.
func CodeInterpreterAvailable() error { return CodeInterpreterAvailableContext(context.Background()) }

// CodeInterpreterAvailableContext is CodeInterpreterAvailable whose probe (a Python that imports Jupyter, a second
// of CPU) is killed when ctx ends: a server that exits before it has answered leaves no such process behind.
func CodeInterpreterAvailableContext(ctx context.Context) error {
	script := "import " + codeInterpreterModules[0] + ", " + codeInterpreterModules[1]
	ctx, cancel := context.WithTimeout(ctx, codeInterpreterStartup)
	defer cancel()
	if out, err := exec.CommandContext(ctx, codeInterpreterPython, "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("the code-interpreter template needs /usr/bin/python3 with jupyter_client and ipykernel "+
			"(Debian: apt-get install python3-jupyter-server python3-ipykernel): %s", bytes.TrimSpace(out))
	}
	return nil
}

// codeInterpreters starts each sandbox's server once; a start that failed is tried again on the next request.
type codeInterpreters struct {
	mu      sync.Mutex
	started map[string]*sync.Mutex // by sandbox; held while its server starts
}

// ensureCodeInterpreter starts sandbox id's server unless it answers already, and waits until it listens.
func (s *Server) ensureCodeInterpreter(ctx context.Context, id, accessToken string) error {
	ci := &s.codeInterpreters
	ci.mu.Lock()
	if ci.started == nil {
		ci.started = map[string]*sync.Mutex{}
	}
	lock := ci.started[id]
	if lock == nil {
		lock = &sync.Mutex{}
		ci.started[id] = lock
	}
	ci.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	if conn, err := s.envd.dialPort(ctx, id, codeInterpreterPort); err == nil {
		conn.Close()
		return nil
	}
	if err := s.startInSandbox(ctx, id, accessToken); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, codeInterpreterStartup)
	defer cancel()
	for {
		conn, err := s.envd.dialPort(ctx, id, codeInterpreterPort)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the code interpreter did not start in %v (its log: /tmp/.code-interpreter.log in the sandbox)",
				codeInterpreterStartup)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startInSandbox starts the server in the sandbox through the sandbox's own envd, as the template's start
// command runs: a process of the sandbox's default user, its output in a log file. The script travels in its
// environment, which the script clears before any kernel inherits it.
func (s *Server) startInSandbox(ctx context.Context, id, accessToken string) error {
	start := map[string]any{"process": map[string]any{
		"cmd": "/bin/bash",
		"args": []string{"-l", "-c", `exec ` + codeInterpreterPython + ` -c "$E2B_CODE_INTERPRETER" ` +
			strconv.Itoa(codeInterpreterPort) + ` >/tmp/.code-interpreter.log 2>&1`},
		"envs": map[string]string{"E2B_CODE_INTERPRETER": codeInterpreterServer, "PYDEVD_DISABLE_FILE_VALIDATION": "1"},
	}}
	payload, err := json.Marshal(start)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	// Closing the stream leaves the process running, as envd does.
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/process.Process/Start",
		bytes.NewReader(connectframe.Append(nil, 0, payload)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", connectframe.ContentTypeStream)
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(envdPort))
	if accessToken != "" {
		req.Header.Set("X-Access-Token", accessToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("starting the code interpreter: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("starting the code interpreter: envd answered %s", resp.Status)
	}
	flags, msg, err := connectframe.NewReader(resp.Body, 1<<20).Next()
	if err != nil {
		return fmt.Errorf("starting the code interpreter: %w", err)
	}
	if flags&0x02 != 0 {
		return fmt.Errorf("starting the code interpreter: %s", msg)
	}
	return nil
}
