//go:build unix

package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A storage-root file swapped for a FIFO after the plan checked it must not hang the upload (opening a FIFO for
// reading waits for a writer, and no context can interrupt that): it is opened without blocking, found not to be
// a regular file, and refused at once, with nothing written in the sandbox. A cancelled call uploads nothing more.
// The upload goes to a real (emulated) sandbox, so that a regression fails this test instead of panicking the run.
func TestUploadRefusesFileSwappedForFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"}).createSandbox(t, nil)
	envd := e.envdOf(t, "alice", id)
	root := t.TempDir()
	file := filepath.Join(root, "data.csv")
	if err := os.WriteFile(file, []byte("a,b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan, err := newBase(Deps{Config: Config{StorageRoots: []string{root}}}).planUploads([]uploadFile{{SessionPath: "data.csv"}})
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		optional.Skip(t, "no FIFOs here: "+err.Error())
	}
	// Whatever happens, release an open that blocks, so that a regression fails instead of hanging the run.
	t.Cleanup(func() {
		if w, err := os.OpenFile(file, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})

	done := make(chan error, 1)
	go func() {
		_, err := plan.upload(context.Background(), envd)
		done <- err
	}()
	if err := waitfor.Recv(t, done, 30*time.Second, "the upload of a FIFO to end (it hangs on the FIFO)"); !errors.Is(err, errNotRegular) {
		t.Errorf("upload of a FIFO: %v, want %v", err, errNotRegular)
	}
	target := plan.files[0].sandboxPath
	if _, err := envd.Stat(context.Background(), target); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("%s in the sandbox after the refused upload: %v, want it absent", target, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := plan.upload(ctx, envd); n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("upload after cancellation: %d files, %v", n, err)
	}
}
