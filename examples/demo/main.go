// Command demo runs a real session of e2b-mcp tool calls against the local backend (sandboxes on this machine,
// isolated with bubblewrap; no E2B account needed) and prints each call and its result, as an assistant would
// see them. Run it with `make demo`, or:
//
//	go build -o bin/e2b-mcp . && go run ./examples/demo -bin bin/e2b-mcp
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/term"
)

func main() {
	bin := flag.String("bin", "bin/e2b-mcp", "the e2b-mcp binary")
	keep := flag.Bool("keep", false, "keep the demo's state directory (its path is printed)")
	verbose := flag.Bool("v", false, "show the server's log (stderr)")
	flag.Parse()
	var wait func(string)
	if term.IsTerminal(int(os.Stdin.Fd())) {
		// A person is at the terminal: the preview stays up until they press Enter.
		wait = func(link string) {
			fmt.Printf("\nOpen %s in your browser: the sandbox's web server. Press Enter to finish the demo.\n", link)
			_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		}
	}
	if err := runWaiting(*bin, *keep, *verbose, os.Stdout, wait); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// consent plays the human at the keyboard: it shows the server's question and approves.
type consent struct{ out io.Writer }

func (c consent) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	fmt.Fprintln(c.out, "   ? the server asks the human:")
	for _, line := range strings.Split(strings.TrimSpace(req.Params.Message), "\n") {
		fmt.Fprintln(c.out, strings.TrimRight("     "+line, " "))
	}
	fmt.Fprintln(c.out, "   ! the human approves")
	content := map[string]any{}
	if schema, ok := req.Params.RequestedSchema.(map[string]any); ok {
		props, _ := schema["properties"].(map[string]any)
		for name, p := range props {
			if prop, _ := p.(map[string]any); prop["type"] == "boolean" {
				content[name] = true
			}
		}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: content}}, nil
}

func run(bin string, keep, verbose bool, out io.Writer) (err error) {
	return runWaiting(bin, keep, verbose, out, nil)
}

// runWaiting is run that, when wait is set, calls it with the preview link while the preview is up (for a person
// to open it) and goes on when it returns.
func runWaiting(bin string, keep, verbose bool, out io.Writer, wait func(link string)) (err error) {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the local backend runs sandboxes with bubblewrap, which needs Linux (this is %s); "+
			"connect your E2B key with `e2b-mcp auth login` and use the real backend (`e2b-mcp serve`), "+
			"or run the demo in a Linux VM or container", runtime.GOOS)
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (build it with `make build`)", err)
	}
	dir, err := os.MkdirTemp("", "e2b-mcp-demo-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(out, "state directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	args := []string{"serve", "--backend", "local", "--session", "demo", "--state-dir", dir + "/state",
		"--storage-root", dir}
	fmt.Fprintf(out, "$ %s %s\n\n", bin, strings.Join(args, " "))
	// The server's stderr is kept (its end) so that a failure shows the server's own words, not only what the
	// client saw (a closed transport).
	serverLog := &lastBytes{max: 4096}
	var stderr io.Writer = serverLog
	if verbose {
		stderr = io.MultiWriter(os.Stderr, serverLog)
	}
	defer func() {
		if err != nil {
			if said := strings.TrimSpace(serverLog.String()); said != "" {
				err = fmt.Errorf("%w\nthe server said:\n%s", err, said)
			}
		}
	}()
	tr := transport.NewStdioWithOptions(bin, nil, args, transport.WithCommandFunc(
		func(_ context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = stderr
			return cmd, nil
		}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		return err
	}
	c := client.NewClient(tr, client.WithElicitationHandler(consent{out}))
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return err
	}
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: "e2b-mcp-demo", Version: "1"}
	info, err := c.Initialize(ctx, init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	fmt.Fprintf(out, "connected to %s %s (protocol %s)\n", info.ServerInfo.Name, info.ServerInfo.Version,
		info.ProtocolVersion)

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d tools:", len(tools.Tools))
	for _, t := range tools.Tools {
		fmt.Fprintf(out, " %s", t.Name)
	}
	fmt.Fprintln(out)

	s := session{ctx: ctx, c: c, out: out}
	created := s.call("e2b_create_sandbox", map[string]any{"title": "demo", "timeout_seconds": 600})
	id, _ := created["sandbox_id"].(string)
	if id == "" {
		return fmt.Errorf("no sandbox was created")
	}
	s.call("e2b_write_file", map[string]any{"sandbox_id": id, "path": "/home/user/primes.sh", "content": primes})
	s.call("e2b_exec", map[string]any{"sandbox_id": id, "command": "bash primes.sh 30 | tee primes.txt",
		"cwd": "/home/user"})
	s.call("e2b_read_file", map[string]any{"sandbox_id": id, "path": "/home/user/primes.txt", "offset": 2, "limit": 3})
	s.call("e2b_exec", map[string]any{"sandbox_id": id, "command": "ls /nonexistent"})
	cp := s.call("e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id, "name": "after-primes"})
	s.call("e2b_list_checkpoints", map[string]any{"sandbox_id": id})
	var forkID string
	if cpID, _ := cp["checkpoint_id"].(string); cpID != "" {
		fork := s.call("e2b_fork_sandbox", map[string]any{"checkpoint_id": cpID, "title": "demo fork"})
		forks, _ := fork["sandboxes"].([]any)
		if len(forks) > 0 {
			forkID, _ = forks[0].(map[string]any)["sandbox_id"].(string)
			s.call("e2b_exec", map[string]any{"sandbox_id": forkID, "command": "wc -l < primes.txt", "cwd": "/home/user"})
		}
	}
	s.call("e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
	s.call("e2b_list_sandboxes", map[string]any{})
	s.call("e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
	s.call("e2b_exec", map[string]any{"sandbox_id": "sbx-does-not-exist", "command": "true"})
	if err := s.preview(id, wait); err != nil {
		return err
	}
	for _, sid := range []string{forkID, id} {
		if sid != "" {
			s.call("e2b_manage_sandbox", map[string]any{"sandbox_id": sid, "action": "delete"})
		}
	}
	s.call("e2b_list_sandboxes", map[string]any{})
	if s.err != nil {
		return s.err
	}
	fmt.Fprintln(out, "\ndemo finished: every call above went through e2b-mcp over MCP (stdio).")
	return nil
}

// preview starts a web server in the sandbox, asks for its link and opens it as a browser would (a name under
// localhost is this machine), then hands it to wait, if set, while the server runs.
func (s *session) preview(id string, wait func(string)) error {
	s.call("e2b_exec", map[string]any{"sandbox_id": id, "background": true, "cwd": "/home/user",
		"command": "python3 -m http.server 8000"})
	var link string
	for range 100 {
		res := s.call("e2b_get_url", map[string]any{"sandbox_id": id, "port": 8000})
		if s.err != nil || res == nil {
			return s.err
		}
		if link, _ = res["url"].(string); res["listening"] == true {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	browser := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network,
		addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(host, ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	resp, err := browser.Get(link)
	if err != nil {
		return fmt.Errorf("opening the preview %s: %w", link, err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	title := "(no title)"
	if _, rest, ok := strings.Cut(string(page), "<title>"); ok {
		title, _, _ = strings.Cut(rest, "</title>")
	}
	fmt.Fprintf(s.out, "\npreview: GET %s → %s, %q\n", link, resp.Status, title)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the preview %s answered %s", link, resp.Status)
	}
	if wait != nil {
		wait(link)
	}
	return nil
}

const primes = `#!/bin/bash
# Prints the primes up to $1, one per line.
for ((n = 2; n <= $1; n++)); do
  for ((d = 2; d * d <= n; d++)); do ((n % d == 0)) && continue 2; done
  echo "$n"
done
`

// lastBytes keeps the last max bytes written to it; the server writes from its own goroutine.
type lastBytes struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *lastBytes) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *lastBytes) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// session prints each call and its answer; the first protocol error stops the rest.
type session struct {
	ctx context.Context
	c   *client.Client
	out io.Writer
	err error
}

func (s *session) call(tool string, args map[string]any) map[string]any {
	if s.err != nil {
		return nil
	}
	fmt.Fprintf(s.out, "\n→ %s %s\n", tool, marshal(args, ""))
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := s.c.CallTool(s.ctx, req)
	if err != nil {
		s.err = fmt.Errorf("%s: %w", tool, err)
		return nil
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			texts = append(texts, tc.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if res.IsError {
		fmt.Fprintf(s.out, "← error: %s\n", indent(text))
		return nil
	}
	var fields map[string]any
	raw := []byte(text)
	if res.StructuredContent != nil {
		raw, _ = json.Marshal(res.StructuredContent)
	}
	if json.Unmarshal(raw, &fields) != nil {
		fmt.Fprintf(s.out, "← %s\n", indent(text))
		return nil
	}
	fmt.Fprintf(s.out, "← %s\n", marshal(fields, "  "))
	return fields
}

// marshal renders v as JSON without HTML escaping (a command's && and < stay readable), indented when indent
// is not empty.
func marshal(v any, indent string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent(indent, "  ")
	}
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ") }
