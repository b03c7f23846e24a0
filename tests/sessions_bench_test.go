package tests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// BenchmarkHTTPSessionsServerCPU is the server's CPU per call (the built binary, read from /proc) while many
// streamable HTTP sessions call at once: each session is an mcp-go client of its own, all calling
// e2b_list_sandboxes until b.N calls are made between them. Fifty sessions to an owner (below each owner's
// bound), so that 500 sessions are ten owners. A server whose work per call grows with the sessions it holds
// shows it as a higher server-cpu-ms/call for 500 than for 50.
func BenchmarkHTTPSessionsServerCPU(b *testing.B) {
	const perOwner = 50
	for _, sessions := range []int{50, 500} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			x := newH(b)
			tokensFile := x.path("tokens.json")
			var tokens []string
			for i := range sessions / perOwner {
				owner := x.owner(fmt.Sprintf("owner%d", i))
				x.login(owner)
				tokens = append(tokens, x.addToken(owner, tokensFile))
			}
			srv := x.startHTTP("serve", "--transport", "http", "--tokens-file", tokensFile,
				"--api-url", the.emu.URL(), "--sandbox-url", the.emu.URL(),
				"--state-dir", x.path("state"), "--policy", x.allowAll())
			clients := make([]*client.Client, sessions)
			sandboxes := make([]string, len(tokens))
			for i := range clients {
				clients[i] = x.connectHTTP(srv.base, tokens[i/perOwner], "")
				if i%perOwner == 0 {
					sandboxes[i/perOwner] = create(b, clients[i], map[string]any{"title": "bench"})
				}
			}
			callAll := func(calls int64) {
				var next atomic.Int64
				var wg sync.WaitGroup
				for i, c := range clients {
					args := map[string]any{"sandbox_id": sandboxes[i/perOwner], "command": "true"}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= calls {
							ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
							res, err := callCtx(ctx, c, "e2b_exec", args, nil)
							cancel()
							if err != nil || res.IsError {
								b.Errorf("e2b_exec: %v %v", err, res)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			callAll(int64(sessions)) // warm every session
			cpu0 := cpuTime(b, srv.cmd.Process.Pid)
			b.ResetTimer()
			callAll(int64(b.N))
			b.StopTimer()
			cpu := cpuTime(b, srv.cmd.Process.Pid) - cpu0
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "server-cpu-ms/call")
			if raceEnabled {
				b.Log("the binary is built with -race, which slows the server several times; `make bench` builds it without")
			}
		})
	}
}
