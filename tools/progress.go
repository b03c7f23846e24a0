package tools

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxProgressMessage bounds the output text of one progress notification; a burst larger than this between two
// notifications is shown by its end, which is what a watcher wants to see.
const maxProgressMessage = 4 << 10

// progress streams a command's output to the client as notifications/progress while it runs, coalescing chunks
// so that at most one notification goes out per interval. A nil *progress (no progress token) does nothing.
type progress struct {
	ctx   context.Context
	token mcp.ProgressToken
	log   *slog.Logger

	mu      sync.Mutex
	pending []byte
	dropped bool
	seen    int64 // bytes of output so far: the notification's progress value, which must grow
	sent    int64

	stop chan struct{}
	done chan struct{}
}

// startProgress starts a progress stream when the request asked for one.
func startProgress(ctx context.Context, interval time.Duration, log *slog.Logger) *progress {
	token := ctx.Value(progressTokenKey{})
	if token == nil || server.ServerFromContext(ctx) == nil {
		return nil
	}
	p := &progress{ctx: ctx, token: token, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop(interval)
	return p
}

func (p *progress) loop(interval time.Duration) {
	defer close(p.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.flush()
		case <-p.stop:
			return
		case <-p.ctx.Done():
			return
		}
	}
}

// add queues an output chunk.
func (p *progress) add(data []byte) {
	if p == nil || len(data) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen += int64(len(data))
	p.pending = append(p.pending, data...)
	if len(p.pending) > 2*maxProgressMessage {
		n := copy(p.pending, p.pending[len(p.pending)-maxProgressMessage:])
		p.pending = p.pending[:n]
		p.dropped = true
	}
}

// flush sends what is pending, if anything.
func (p *progress) flush() {
	p.mu.Lock()
	if len(p.pending) == 0 || p.seen == p.sent {
		p.mu.Unlock()
		return
	}
	chunk := p.pending
	if len(chunk) > maxProgressMessage {
		chunk = chunk[len(chunk)-maxProgressMessage:]
		p.dropped = true
	}
	msg := strings.ToValidUTF8(string(chunk), "\uFFFD")
	if p.dropped {
		msg = "…" + msg
	}
	p.pending, p.dropped = p.pending[:0], false
	p.sent = p.seen
	seen := p.seen
	p.mu.Unlock()

	// Sent before flush returns, so that finish (which the call's handler waits for) leaves none on the way.
	err := notify(p.ctx, string(mcp.MethodNotificationProgress), map[string]any{
		"progressToken": p.token,
		"progress":      seen,
		"message":       msg,
	})
	if err != nil {
		p.log.Debug("sending a progress notification", "err", err)
	}
}

// finish stops the ticker and sends the rest of the output.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	if p.ctx.Err() == nil {
		p.flush()
	}
}
