package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// BenchmarkOwnerClientFromKeyring is what every call of the E2B backend spends finding its owner's key: the
// client made with the key as the default secret store (Config.Secrets nil: the OS keyring) holds it, here the
// real Secret Service of tests/with-keyring.sh, with an entry that is not changing.
func BenchmarkOwnerClientFromKeyring(b *testing.B) {
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		optional.Missing(b, "no D-Bus session: run the benchmark under tests/with-keyring.sh")
	}
	cfg, err := Config{Owner: "bench-owner", StateDir: b.TempDir()}.Check()
	if err != nil {
		b.Fatal(err)
	}
	const owner = "bench-owner"
	if err := credentials.SetAPIKey(cfg.Secrets, owner, "e2b_"+strings.Repeat("5e", 20)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := credentials.DeleteAPIKey(cfg.Secrets, owner); err != nil && !errors.Is(err, credentials.ErrNoKey) {
			b.Error(err)
		}
	})
	// The keyring's change times count whole seconds: start in the second after the entry was written, as a
	// server does whose owner logged in a while ago.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	clients := newStoredKeyClients(cfg.Secrets, e2b.Config{APIURL: "http://127.0.0.1:9"}, cfg.Logger, newMetrics())
	for b.Loop() {
		if _, err := clients.Client(b.Context(), owner); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGovernedCall measures what the middleware adds to every tool call (caller, lease renewal, argument
// check, policy, audit record) around a tool that does nothing, through an in-process client.
func BenchmarkGovernedCall(b *testing.B) {
	for _, version := range eras {
		b.Run(version, func(b *testing.B) {
			f := newFixture(b, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
				c.Logger = slog.New(slog.DiscardHandler)
			}})
			f.srv.mcp.AddTool(mcp.NewTool("bench_noop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
			c := connect(b, f.srv, version, nil)
			var req mcp.CallToolRequest
			req.Params.Name = "bench_noop"
			req.Params.Arguments = map[string]any{"sandbox_id": "abc", "command": "true"}
			for b.Loop() {
				res, err := c.CallTool(b.Context(), req)
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// BenchmarkWriteFile1MiB is an e2b_write_file of 1 MiB through an in-process MCP client, the whole chain: the
// client's encoding, mcp-go's parsing, the middleware (argument check, policy, audit), the tool's argument
// binding and the upload to the emulator's envd.
var benchLines = 1 << 20

func BenchmarkWriteFile1MiB(b *testing.B) {
	benchWriteFile1MiB(b, "", func(f *fixture) *client.Client { return connect(b, f.srv, eras[0], nil) })
}

// benchWriteFile1MiB is BenchmarkWriteFile1MiB's call through the client that attach gives to a server of
// transport (the default when empty) that logs nothing, with the process's CPU per call.
func benchWriteFile1MiB(b *testing.B, transport string, attach func(*fixture) *client.Client) {
	f := newFixture(b, fixtureOpts{transport: transport, mutate: func(c *Config, _ *e2btest.Server) {
		c.Logger = slog.New(slog.DiscardHandler)
	}})
	c := attach(f)
	id := createSandbox(b, c)
	line := strings.Repeat("0123456789abcdef", 4) + "\n"
	content := strings.Repeat(line, benchLines/len(line))
	var req mcp.CallToolRequest
	req.Params.Name = "e2b_write_file"
	req.Params.Arguments = map[string]any{"sandbox_id": id, "path": "/home/user/big.txt", "content": content}
	b.SetBytes(int64(len(content)))
	cpu := processCPU(b)
	for b.Loop() {
		res, err := c.CallTool(b.Context(), req)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkCreateDelete is a sandbox's whole life through an in-process MCP client: e2b_create_sandbox, then
// e2b_manage_sandbox delete, against the emulator.
func BenchmarkCreateDelete(b *testing.B) {
	f := newFixture(b, fixtureOpts{policy: allowAll, mutate: func(c *Config, _ *e2btest.Server) {
		c.Logger = slog.New(slog.DiscardHandler)
	}})
	c := connect(b, f.srv, eras[0], nil)
	for b.Loop() {
		id := createSandbox(b, c)
		mustOK(b, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
	}
}

// BenchmarkStdioWriteFile1MiB is BenchmarkWriteFile1MiB over the stdio transport, as a client that launched the
// server calls it: the lines of JSON-RPC through ServeStdio's front and mcp-go's handler, which is where a big
// message is parsed more than once.
func BenchmarkStdioWriteFile1MiB(b *testing.B) {
	benchWriteFile1MiB(b, "", func(f *fixture) *client.Client { return stdioClient(b, f.srv) })
}

// BenchmarkHTTPWriteFile1MiB is BenchmarkWriteFile1MiB over streamable HTTP in protocol 2026-07-28, as a remote
// client calls it: the POST through the server's HTTP front (body limit, caller, the cancels of that protocol, the
// Tasks extension) and mcp-go's streamable transport, each of which may read and parse the megabyte.
func BenchmarkHTTPWriteFile1MiB(b *testing.B) {
	benchWriteFile1MiB(b, TransportHTTP, func(f *fixture) *client.Client {
		return streamableClient(b, serveHTTP(b, f), "", "bench", mcp.ProtocolVersion20260728)
	})
}

// BenchmarkStdioStartToToolsList is a stdio server's start, in process, to its answer to the client's first
// tools/list: RunStdio answering initialize and tools/list, and building the server as far as it does before the
// list is answered. The process's own start (the runtime, package initialisation) is not in it, nor what follows
// the answer.
func BenchmarkStdioStartToToolsList(b *testing.B) {
	emu, err := e2btest.New(e2btest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emu.Close)
	cfg := Config{Owner: "alice", Session: "s1", StateDir: b.TempDir(), Backend: emulatorAt(emu.URL()),
		Secrets: newTestSecrets(), Logger: slog.New(slog.DiscardHandler)}
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` +
		`"clientInfo":{"name":"claude-code","version":"2"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	var cpu time.Duration
	for b.Loop() {
		start := processCPU(b)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- RunStdio(b.Context(), cfg, inR, outW, New) }()
		go func() { _, _ = inW.Write([]byte(in)) }()
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), `{"jsonrpc":"2.0","id":2,`) {
		}
		cpu += processCPU(b) - start
		b.StopTimer()
		inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		if err := waitfor.Recv(b, done, time.Minute, "RunStdio to return at the end of input"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkStdioToolsList is a tools/list of a client over stdio once the server runs: the list fitted to the
// client, in the client's protocol era, as the client reads it.
func BenchmarkStdioToolsList(b *testing.B) {
	f := newFixture(b, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
		c.Logger = slog.New(slog.DiscardHandler)
	}})
	c := stdioClient(b, f.srv)
	cpu := processCPU(b)
	for b.Loop() {
		if _, err := c.ListTools(b.Context(), mcp.ListToolsRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used (user and system, all threads): the client's and the
// emulator's besides the server's, which are the same whatever the server does, and steadier than wall time on a
// busy machine.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
