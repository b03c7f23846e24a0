// Command clients drives real AI assistants (Claude Code, Codex CLI, Gemini CLI, GitHub Copilot CLI, installed
// from npm by scripts/clients/run.sh) against e2b-mcp's local backend, headless, with a scripted stand-in for
// each one's model API, over stdio and streamable HTTP, and prints what reached the model at each step of a
// user's session: create, write, exec, a failing exec, a timeout_ms kill, a long output, a PNG, a long job
// followed to its end, and a delete under the built-in policy approved on the approval page. Not part of
// `make test` (it needs the assistants, and a network namespace of its own): `make clients`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/e2b-mcp", "the e2b-mcp binary")
	prefix := flag.String("prefix", "", "the npm prefix the assistants are installed in (node_modules/.bin under it)")
	only := flag.String("clients", "claude,codex,gemini,copilot", "the assistants to run, comma-separated")
	transports := flag.String("transports", "stdio,http", "stdio, http or both")
	workDir := flag.String("dir", "", "where each run keeps its files (default: a temporary directory)")
	timeout := flag.Duration("timeout", 8*time.Minute, "how long one assistant's session may take")
	tui := flag.Bool("tui", false, "instead, drive Claude Code's terminal UI under tmux: a long e2b_exec as an MCP task")
	serveFlags := flag.String("serve-flags", "",
		"more flags for e2b-mcp serve, space-separated (e.g. --result-limit 30000)")
	flag.Parse()
	if *workDir == "" {
		d, err := os.MkdirTemp("", "e2b-mcp-clients-")
		if err != nil {
			log.Fatal(err)
		}
		*workDir = d
	}
	absBin, err := filepath.Abs(*bin)
	if err != nil {
		log.Fatal(err)
	}
	if *tui {
		r := tuiSession(absBin, *prefix, filepath.Join(*workDir, "claude-tui"), *timeout)
		printTable(os.Stdout, []*run{r}, nil)
		for _, res := range r.results {
			if !res.pass {
				os.Exit(1)
			}
		}
		return
	}
	raw, err := os.Create(filepath.Join(*workDir, "standin.log"))
	if err != nil {
		log.Fatal(err)
	}
	model := &standIn{raw: raw}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = http.Serve(ln, model) }()
	modelURL := "http://" + ln.Addr().String()
	log.Printf("stand-in model API at %s; files in %s", modelURL, *workDir)

	var rows []*run
	for _, c := range strings.Split(*only, ",") {
		a, ok := assistants[c]
		if !ok {
			log.Fatalf("no assistant %q (want claude, codex, gemini or copilot)", c)
		}
		for _, tr := range strings.Split(*transports, ",") {
			dir := filepath.Join(*workDir, c+"-"+tr)
			r := &run{client: c + " " + tr, made: map[string]bool{}, read: map[string]bool{}}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				log.Fatal(err)
			}
			handed, err := os.Create(filepath.Join(dir, "results.jsonl"))
			if err != nil {
				log.Fatal(err)
			}
			r.handed = handed
			model.start(r)
			err = session(a, r, session_{bin: absBin, prefix: *prefix, dir: dir, modelURL: modelURL,
				transport: tr, timeout: *timeout, serveFlags: strings.Fields(*serveFlags)})
			model.start(nil)
			handed.Close()
			if err != nil {
				r.results = append(r.results, stepResult{"session", false, err.Error()})
			}
			rows = append(rows, r)
			for _, line := range r.log {
				log.Printf("%s: %s", r.client, line)
			}
		}
	}
	printTable(os.Stdout, rows, scenario)
	for _, r := range rows {
		for _, res := range r.results {
			if !res.pass {
				os.Exit(1)
			}
		}
		if r.next < len(scenario) {
			os.Exit(1)
		}
	}
}

type session_ struct {
	bin, prefix, dir, modelURL, transport string
	timeout                               time.Duration
	serveFlags                            []string
}

// session runs one assistant's headless session to its end.
func session(a assistant, r *run, s session_) error {
	serverArgs := []string{"serve", "--backend", "local", "--state-dir", filepath.Join(s.dir, "state"),
		"--exec-foreground-limit", "3s"}
	serverArgs = append(serverArgs, s.serveFlags...)
	server := mcpServer{command: s.bin, args: serverArgs}
	if s.transport == "http" {
		port, err := freePort()
		if err != nil {
			return err
		}
		args := append(append([]string{}, serverArgs...), "--transport", "http", "--listen", "127.0.0.1:"+port)
		cmd := exec.Command(s.bin, args...)
		logf, err := os.Create(filepath.Join(s.dir, "e2b-mcp.log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
		server = mcpServer{url: "http://127.0.0.1:" + port + "/mcp"}
		if err := waitListening("127.0.0.1:"+port, 30*time.Second); err != nil {
			return err
		}
	}
	home := filepath.Join(s.dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	cmdArgs, env, err := a.setup(home, s.modelURL, server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.prefix, "node_modules", ".bin", cmdArgs[0]), cmdArgs[1:]...)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "NO_COLOR=1", "CI=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := os.Create(filepath.Join(s.dir, "assistant.log"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("the session did not end within %v (see %s)", s.timeout, out.Name())
	}
	if err != nil {
		return fmt.Errorf("%v (see %s)", err, out.Name())
	}
	return nil
}

// mcpServer is e2b-mcp as an assistant's configuration names it: a command over stdio, or a URL.
type mcpServer struct {
	command string
	args    []string
	url     string
}

// approveOnPage plays the user who opens the approval page's link and presses Approve.
func approveOnPage(link string) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.Get(link)
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		return fmt.Errorf("no form on the page (HTTP %d)", resp.StatusCode)
	}
	u, _ := url.Parse(link)
	req, _ := http.NewRequest(http.MethodPost, link, strings.NewReader(url.Values{"csrf": {string(m[1])},
		"choice": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.Scheme+"://"+u.Host)
	resp, err = c.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Approved") {
		return fmt.Errorf("the approval page answered %d to Approve", resp.StatusCode)
	}
	return nil
}

// printTable prints a row per step of steps (or, for nil, the steps the runs found) and a column per run.
func printTable(w io.Writer, rows []*run, steps []step) {
	fmt.Fprintf(w, "\n| step |")
	for _, r := range rows {
		fmt.Fprintf(w, " %s |", r.client)
	}
	fmt.Fprintf(w, "\n|---|")
	for range rows {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	names := []string{}
	for _, s := range steps {
		names = append(names, s.name)
	}
	if steps == nil {
		for _, r := range rows {
			for _, res := range r.results {
				if res.step != "session" && !slices.Contains(names, res.step) {
					names = append(names, res.step)
				}
			}
		}
	}
	names = append(names, "session")
	for _, name := range names {
		line := "| " + name + " |"
		any := false
		for _, r := range rows {
			cell := "–"
			for _, res := range r.results {
				if res.step == name {
					mark := "✓"
					if !res.pass {
						mark = "✗"
					}
					cell = mark + " " + strings.ReplaceAll(res.note, "|", "/")
					any = true
				}
			}
			line += " " + cell + " |"
		}
		if any || name != "session" {
			fmt.Fprintln(w, line)
		}
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("e2b-mcp did not listen on %s within %v", addr, d)
}
