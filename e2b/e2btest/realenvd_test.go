package e2btest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// helperEnv makes this test binary, run again by TestRealEnvdDiesWithTheTestProcess, the test process that starts
// an envd and is killed.
const helperEnv = "E2BTEST_REAL_ENVD_HELPER"

// TestRealEnvdHelperProcess is the killed test process of TestRealEnvdDiesWithTheTestProcess: it starts a real
// envd, prints its run directory and waits to be killed.
func TestRealEnvdHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestRealEnvdDiesWithTheTestProcess only")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := StartRealEnvd(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ENVD_RUN=%s\n", r.run)
	time.Sleep(2 * time.Minute) // the parent kills this process long before
}

// A real envd started by a test stops when the test process is killed (-9, as go test's timeout or an OOM kill
// ends it), together with its relay, and its run directory goes: envd runs in a session of its own, which no
// signal to the test process reaches.
func TestRealEnvdDiesWithTheTestProcess(t *testing.T) {
	if _, err := RealEnvdAvailable(); err != nil {
		why := "not run against the real envd: " + err.Error()
		if RealEnvdExpected() {
			optional.Missing(t, why)
		}
		optional.Skip(t, why)
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestRealEnvdHelperProcess$", "-test.v")
	helper.Env = append(os.Environ(), helperEnv+"=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill() })
	runDir := make(chan string, 1)
	go func() {
		var lines []string
		for sc := bufio.NewScanner(out); sc.Scan(); {
			if run, found := strings.CutPrefix(sc.Text(), "ENVD_RUN="); found {
				runDir <- run
				return
			}
			lines = append(lines, sc.Text())
		}
		runDir <- "the helper printed no run directory:\n" + strings.Join(lines, "\n")
	}()
	run := waitfor.Recv(t, runDir, 2*time.Minute, "the helper process to start an envd")
	if !filepath.IsAbs(run) {
		t.Fatal(run)
	}
	var pids []int
	for _, f := range []string{"envd.pid", "relay.pid"} {
		b, err := os.ReadFile(filepath.Join(run, f))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !alive(pid) {
			t.Fatalf("%s: %q is not a running process", f, b)
		}
		pids = append(pids, pid)
	}

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitfor.Return(t, 30*time.Second, "the killed helper process to be reaped", func() { _ = helper.Wait() })
	waitfor.Until(t, 30*time.Second, fmt.Sprintf("envd and its relay (pids %v) to end with the killed test process", pids), func() bool {
		return !alive(pids[0]) && !alive(pids[1])
	})
	waitfor.Until(t, 30*time.Second, "the envd's run directory to be removed", func() bool {
		_, err := os.Stat(run)
		return errors.Is(err, os.ErrNotExist)
	})
}

// alive reports whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// Each real envd is a sandbox of its own, as on E2B: a file one writes in /tmp or /home/user is not in another's,
// nor in the host's. Tests that use envds at once (go test runs packages side by side) then never meet in the
// files the server keeps there.
func TestRealEnvdsHaveTheirOwnTmpAndHome(t *testing.T) {
	if _, err := RealEnvdAvailable(); err != nil {
		why := "not run against the real envd: " + err.Error()
		if RealEnvdExpected() {
			optional.Missing(t, why)
		}
		optional.Skip(t, why)
	}
	var envds []*RealEnvd
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		r, err := StartRealEnvd(ctx, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		envds = append(envds, r)
	}
	name := "e2btest-own-" + randomName()
	for _, dir := range []string{"/tmp", "/home/user"} {
		path := dir + "/" + name
		if status := envdFile(t, envds[0], http.MethodPost, path, "written in the first envd"); status != http.StatusOK {
			t.Fatalf("writing %s in the first envd: %d", path, status)
		}
		if status := envdFile(t, envds[0], http.MethodGet, path, ""); status != http.StatusOK {
			t.Fatalf("reading %s back in the first envd: %d", path, status)
		}
		if status := envdFile(t, envds[1], http.MethodGet, path, ""); status != http.StatusNotFound {
			t.Errorf("the second envd reads %s, written in the first: %d, want 404", path, status)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the host has %s, written in the first envd: %v", path, err)
			os.Remove(path)
		}
	}
}

func randomName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// envdFile writes body to path (POST /files) or reads path (GET /files) as the user "user", and returns the status.
func envdFile(t *testing.T, r *RealEnvd, method, path, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, r.URL+"/files?username=user&path="+url.QueryEscape(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Access-Token", r.AccessToken)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// A start of envd that fails the way start.sh does when another envd ends during its walk of /proc (exit 2,
// nothing said) is tried again, and the envd then started is booted and answers.
func TestRealEnvdStartTriedAgain(t *testing.T) {
	real, err := RealEnvdAvailable()
	if err != nil {
		why := "not run against the real envd: " + err.Error()
		if RealEnvdExpected() {
			optional.Missing(t, why)
		}
		optional.Skip(t, why)
	}
	// Not under /tmp: start.sh runs where /tmp is the envd's own (privateScript).
	dir, err := os.MkdirTemp(runBase, "envd-flaky.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	failed := filepath.Join(dir, "failed-once")
	script := fmt.Sprintf("#!/bin/sh\n[ -e %[1]q ] || { : >%[1]q; exit 2; }\nexec %[2]q \"$@\"\n",
		failed, filepath.Join(real, "start.sh"))
	if err := os.WriteFile(filepath.Join(dir, "start.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "stop.sh"), filepath.Join(dir, "stop.sh")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := startRealEnvdIn(ctx, dir, "", nil)
	if err != nil {
		t.Fatalf("a start that failed once was not tried again: %v", err)
	}
	t.Cleanup(r.Stop)
	if _, err := os.Stat(failed); err != nil {
		t.Fatalf("the first start did not fail as planted: %v", err)
	}
	if status := envdFile(t, r, http.MethodPost, "/tmp/e2btest-again", "started on the second try"); status != http.StatusOK {
		t.Fatalf("the envd started on the second try: writing a file: %d", status)
	}
}
