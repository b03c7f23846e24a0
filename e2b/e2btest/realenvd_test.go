package e2btest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
