package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/zalando/go-keyring"
)

// A client that finds no answer to initialize at once picks an older protocol or starts without the server's
// tools, so the local backend answers before it has asked this machine anything slow: here the check for Jupyter
// never ends until the test lets it, and the server is created, serves stdio, answers initialize and creates a
// base sandbox all the same. Only a create of the code-interpreter template waits for the check, and then says
// what it answered.
func TestInitializeBeforeMachineChecks(t *testing.T) {
	keyring.MockInit()
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	check := func(context.Context) error {
		asked <- struct{}{}
		<-release
		return errors.New("no Jupyter on this test's machine")
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	made := make(chan *Server, 1)
	failed := make(chan error, 1)
	go func() {
		srv, err := New(Config{Owner: "alice", StateDir: t.TempDir(), Backend: Local{checks: &localChecks{codeInterpreter: check}}, Logger: testLogger(t)})
		if err != nil {
			failed <- err
			return
		}
		made <- srv
	}()
	var srv *Server
	select {
	case srv = <-made:
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return within 30s while the check for Jupyter was still running")
	}
	defer srv.Close()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(t.Context(), inR, outW)
		outW.Close()
	}()
	c := client.NewClient(transport.NewIO(outR, inW, nil), client.WithProtocolVersion(eras[0]))
	initialize(t, c, eras[0]) // bounded: fails after 30s
	createSandbox(t, c)
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the check for Jupyter had not started 30s after the server's")
	}

	created := make(chan string, 1)
	go func() {
		res := callTool(t, c, "e2b_create_sandbox", map[string]any{"template": "code-interpreter-v1"})
		created <- resultText(res)
	}()
	close(release)
	released = true
	select {
	case got := <-created:
		if !strings.Contains(got, "not offered here") {
			t.Errorf("a create of the code-interpreter template where the check failed answered:\n%s", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the code-interpreter create did not answer within a minute of the check's answer")
	}
	c.Close()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
}

// The local backend's checks of this machine end with the server: a server that an assistant stops before the
// check for Jupyter (a Python importing it, a second of CPU) has answered leaves no such process running.
func TestLocalChecksEndWithTheServer(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{}, 1)
	check := func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		ended <- struct{}{}
		return ctx.Err()
	}
	srv, err := New(Config{Owner: "alice", StateDir: t.TempDir(), Backend: Local{checks: &localChecks{codeInterpreter: check}},
		Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		srv.Close()
		t.Fatal("the check for Jupyter did not start within 30 s of New")
	}
	srv.Close()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the check for Jupyter still ran 30 s after the server closed")
	}
}
