package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// realEnvd is E2B's own envd daemon (../shared/envd beside the repository), one "sandbox", booted with /init as
// E2B's orchestrator boots one.
type realEnvd struct {
	url, token string
}

// startRealEnvd starts a real envd for the test, or skips it, saying why, where the daemon is absent or cannot
// run (it needs root).
func startRealEnvd(t *testing.T) *realEnvd {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "shared", "envd"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "start.sh")); err != nil {
		optional.Skip(t, "not run against the real envd: "+dir+" is absent")
	}
	if os.Geteuid() != 0 {
		optional.Skip(t, "not run against the real envd: "+dir+"/start.sh needs root")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "start.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("starting the real envd: %v\n%s", err, stderr.String())
	}
	vars := map[string]string{}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, f := range strings.Fields(lines[len(lines)-1]) {
		if k, v, ok := strings.Cut(f, "="); ok {
			vars[k] = v
		}
	}
	if vars["ENVD_URL"] == "" || vars["ENVD_RUN"] == "" {
		t.Fatalf("start.sh printed no ENVD_URL/ENVD_RUN: %q", out)
	}
	t.Cleanup(func() {
		_ = exec.Command(filepath.Join(dir, "stop.sh"), vars["ENVD_RUN"]).Run()
		_ = os.RemoveAll(vars["ENVD_RUN"])
	})
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	r := &realEnvd{url: vars["ENVD_URL"], token: hex.EncodeToString(tok)}
	body, _ := json.Marshal(map[string]any{"accessToken": r.token, "envVars": map[string]string{},
		"defaultUser": "user", "defaultWorkdir": "/home/user"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/init", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("envd /init: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("envd /init: %s", resp.Status)
	}
	return r
}
