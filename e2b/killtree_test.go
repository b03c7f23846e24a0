package e2b

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A kill of the process group that hangs (its command in the sandbox never answers) does not take the fallback's
// time: the SendSignal of the command's own pid is still sent, on a deadline of its own.
func TestKillTreeFallbackOutlivesAHangingGroupKill(t *testing.T) {
	kills := make(chan string, 4)
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case bytes.Contains(body, []byte("kill -KILL")):
			kills <- "tree"
			<-r.Context().Done() // the group kill never answers
		case answerKillTree(w, r, body, kills):
		default:
			writeFrames(w, frame(0, `{"event":{"start":{"pid":77}}}`))
			<-r.Context().Done()
		}
	})
	e := f.envd(t, "0.6.13")
	e.killGrace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	res, err := e.RunCommand(ctx, "sleep 100", CommandOptions{OnStart: func(uint32) { cancel() }})
	if !errors.Is(err, context.Canceled) || res.PID != 77 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if got := waitfor.Recv(t, kills, 30*time.Second, "the kill of the process group"); got != "tree" {
		t.Fatalf("first kill %q, want the process group's", got)
	}
	select {
	case got := <-kills:
		if got != `SendSignal {"process":{"pid":77},"signal":"SIGNAL_SIGKILL"}` {
			t.Fatalf("then %q", got)
		}
	default:
		t.Fatal("no SendSignal after the group kill hung: it had no time left")
	}
}
