package state

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func runHelper(mode, dir, arg string) error {
	s, err := Open(dir, Options{Keys: StaticKeySource(testKey(1))})
	if err != nil {
		return err
	}
	defer s.Close()
	switch mode {
	case "put-forever":
		// Acknowledge each record on stdout once PutSandbox has returned; the parent kills us at some point.
		for i := 0; ; i++ {
			r := crashRecord(arg, i)
			if err := s.PutSandbox(r); err != nil {
				return err
			}
			fmt.Println(r.ID)
		}
	case "increment":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		for range n {
			if _, err := s.UpdateSandbox("alice", "counter", func(r *SandboxRecord) error {
				r.Steps++
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	case "write-until-stdin-closes":
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
		for i := 0; ; i++ {
			if err := s.PutSandbox(crashRecord("bg", i%100)); err != nil {
				return err
			}
			fmt.Println(i) // lets the parent count this process's writes
		}
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// crashRecord is record i of a child's run, reproducible by the parent.
func crashRecord(run string, i int) SandboxRecord {
	return SandboxRecord{
		ID: fmt.Sprintf("sbx-%s-%06d", run, i), Owner: "alice", Session: "s-" + run, Title: strings.Repeat("t", i%300),
		Template: "base", State: StateRunning, AccessToken: fmt.Sprintf("tok-%s-%d", run, i), TimeoutSeconds: i,
	}
}

func helperCmd(t testing.TB, mode, dir, arg string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir, helperArgEnv+"="+arg)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestCrashKeepsAcknowledgedWrites kills a writing child with SIGKILL at a random point, several times over the
// same file, and checks that every record it acknowledged is there and the file still opens cleanly.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		optional.Skip(t, "-short: spawns processes")
	}
	dir := t.TempDir()
	openTestStore(t, dir, Options{}).Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points seeded with %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	acked := map[string]SandboxRecord{}
	for run := range 4 {
		runName := strconv.Itoa(run)
		cmd := helperCmd(t, "put-forever", dir, runName)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 3 + rng.IntN(150)
		sc := bufio.NewScanner(out)
		lines := 0
		for sc.Scan() {
			id := sc.Text()
			i, err := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
			if err != nil {
				t.Fatalf("child printed %q", id)
			}
			acked[id] = crashRecord(runName, i)
			if lines++; lines == killAfter {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		}
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.Exited() {
			t.Fatalf("run %d: child was not killed by the signal: %v (it acknowledged %d)", run, err, lines)
		}
		if lines < killAfter {
			t.Fatalf("run %d: child stopped after %d records", run, lines)
		}
	}

	s := openTestStore(t, dir, Options{})
	all, err := s.AllSandboxes()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SandboxRecord{}
	for _, r := range all {
		got[r.ID] = r
	}
	for id, want := range acked {
		r, ok := got[id]
		if !ok {
			t.Errorf("acknowledged record %s lost", id)
			continue
		}
		if r.AccessToken != want.AccessToken || r.Title != want.Title || r.TimeoutSeconds != want.TimeoutSeconds {
			t.Errorf("record %s = %+v, want %+v", id, r, want)
		}
	}
	t.Logf("%d acknowledged records across 4 killed writers, %d stored", len(acked), len(all))
}

// TestProcessesAndGoroutinesLoseNoUpdate increments one counter from two processes and two goroutines at once.
func TestProcessesAndGoroutinesLoseNoUpdate(t *testing.T) {
	if testing.Short() {
		optional.Skip(t, "-short: spawns processes")
	}
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	if err := s.PutSandbox(SandboxRecord{ID: "counter", Owner: "alice", State: StateRunning}); err != nil {
		t.Fatal(err)
	}
	const perWorker, procs, goroutines = 25, 2, 2
	var cmds []*exec.Cmd
	for range procs {
		cmd := helperCmd(t, "increment", dir, strconv.Itoa(perWorker))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range perWorker {
				if _, err := s.UpdateSandbox("alice", "counter", func(r *SandboxRecord) error {
					r.Steps++
					return nil
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	waitfor.Return(t, time.Minute, "the concurrent writers", wg.Wait)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	r, err := s.Sandbox("alice", "counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := perWorker * (procs + goroutines); r.Steps != want {
		t.Fatalf("Steps = %d, want %d", r.Steps, want)
	}
}

// TestBusyWriterDoesNotStarveOthers: another process writing back to back must not keep this one from its turn
// (lock calls that fail instead of waiting would let it, see turnstile).
func TestBusyWriterDoesNotStarveOthers(t *testing.T) {
	if testing.Short() {
		optional.Skip(t, "-short: spawns processes")
	}
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{LockTimeout: 3 * time.Second})
	other := helperCmd(t, "write-until-stdin-closes", dir, "")
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = other.Wait()
	}()
	lines := bufio.NewReader(stdout)
	if _, err := lines.ReadString('\n'); err != nil {
		t.Fatalf("the other process did not start writing: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	for i := range 20 {
		if err := s.PutSandbox(sampleSandbox("alice", fmt.Sprintf("mine%02d", i), "main", time.Now())); err != nil {
			t.Fatalf("write %d while another process writes continuously: %v", i, err)
		}
		if _, err := s.SessionSandboxes("alice", "main"); err != nil {
			t.Fatalf("read %d while another process writes continuously: %v", i, err)
		}
	}
}
