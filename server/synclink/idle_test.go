package synclink

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A step's body that stops coming ends the step with a timeout once it has been idle that long, rather than
// holding the step (and the upload into a sandbox it feeds) for as long as the member's side stays connected.
func TestAStalledBodyEndsTheStep(t *testing.T) {
	read := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: 100 * time.Millisecond}
		_, err := io.ReadAll(body)
		read <- err
	}))
	t.Cleanup(srv.Close)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, pr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if _, err := pw.Write([]byte("the start of a stream, then nothing")); err != nil {
		t.Fatal(err)
	}
	if err := waitfor.Recv(t, read, 30*time.Second, "the stalled body's read to end"); !errors.Is(err,
		os.ErrDeadlineExceeded) {
		t.Fatalf("reading a stalled body: %v, want a deadline exceeded", err)
	}
}
