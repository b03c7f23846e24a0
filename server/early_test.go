package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

// A stdio client's initialize is answered while the server is still being built, with the very answer the
// server gives; the calls it makes meanwhile wait and then work, made by a server that knows the client from
// the initialize it did not answer itself (here Codex, whose e2b_read_file comes without an outputSchema); the
// server's own answer to that initialize is not sent a second time. In both protocol eras.
func TestInitializeAnsweredWhileTheServerIsBuilt(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			emu, err := e2btest.New(e2btest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(emu.Close)
			cfg := Config{Owner: "alice", Session: "s1", StateDir: t.TempDir(), Backend: emulatorAt(emu.URL()),
				Secrets: newTestSecrets(), Logger: testLogger(t)}
			release := make(chan struct{})
			build := func(c Config) (*Server, error) {
				<-release // the build outlasts everything the client sends before release
				return New(c)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- RunStdio(ctx, cfg, inR, outW, build) }()
			t.Cleanup(func() {
				cancel()
				inW.Close()
				outR.Close()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Error("RunStdio did not return within 30 s of its context's end")
				}
			})
			answers := make(chan map[string]any, 16)
			go func() {
				sc := bufio.NewScanner(outR)
				sc.Buffer(make([]byte, 1<<20), 8<<20)
				for sc.Scan() {
					var m map[string]any
					if json.Unmarshal(sc.Bytes(), &m) == nil {
						answers <- m
					}
				}
			}()
			send := func(v map[string]any) {
				t.Helper()
				v["jsonrpc"] = "2.0"
				b, _ := json.Marshal(v)
				if _, err := inW.Write(append(b, '\n')); err != nil {
					t.Fatal(err)
				}
			}
			next := func(what string) map[string]any {
				t.Helper()
				select {
				case a := <-answers:
					return a
				case <-time.After(30 * time.Second):
					t.Fatalf("no answer within 30 s: %s", what)
					return nil
				}
			}

			initialize := map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
				"protocolVersion": version, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "codex-mcp-client", "version": "0.169.0"}}}
			send(initialize)
			early := next("initialize, while the server is built")
			send(map[string]any{"id": 2, "method": "ping"})
			if pong := next("ping, while the server is built"); pong["id"] != float64(2) || pong["result"] == nil {
				t.Fatalf("ping: %v", pong)
			}
			send(map[string]any{"method": "notifications/initialized"})
			send(map[string]any{"id": 3, "method": "tools/list"})
			earlyList := next("tools/list, while the server is built")
			if earlyList["id"] != float64(3) {
				t.Fatalf("the answer to tools/list while the server is built: %v", earlyList)
			}
			send(map[string]any{"id": 4, "method": "tools/call", "params": map[string]any{"name": "e2b_create_sandbox",
				"arguments": map[string]any{"title": "made before the server was built"}}})
			close(release)
			byID := map[float64]map[string]any{3: earlyList}
			byID[4] = next("a create made while the server was built")
			if byID[4]["id"] != float64(4) {
				t.Fatalf("answer %v, want that of request 4 (the server's own answers to initialize and tools/list dropped)",
					byID[4])
			}
			send(map[string]any{"id": 5, "method": "tools/list"})
			if built := next("tools/list of the built server"); built["id"] != float64(5) {
				t.Errorf("the built server's answer to tools/list: %v", built)
			} else if got, want := mustJSON(t, earlyList["result"]), mustJSON(t, built["result"]); got != want {
				t.Errorf("tools/list answered while the server was built:\n%.300s\nthe built server's:\n%.300s", got, want)
			}
			list, _ := json.Marshal(byID[3]["result"])
			var tools struct {
				Tools []struct {
					Name         string `json:"name"`
					OutputSchema any    `json:"outputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(list, &tools); err != nil || len(tools.Tools) == 0 {
				t.Fatalf("tools/list: %v %s", err, list)
			}
			for _, tool := range tools.Tools {
				if tool.Name == "e2b_read_file" && tool.OutputSchema != nil {
					t.Errorf("e2b_read_file has an outputSchema: the server does not know the client is Codex")
				}
			}
			created, _ := json.Marshal(byID[4]["result"])
			if !strings.Contains(string(created), "sandbox_id") || strings.Contains(string(created), `"isError":true`) {
				t.Errorf("the create made while the server was built: %s", created)
			}

			// The early answer is the server's own.
			f := newFixture(t, fixtureOpts{})
			line, _ := json.Marshal(initialize)
			own, _ := json.Marshal(f.srv.mcp.HandleMessage(t.Context(), line))
			got, _ := json.Marshal(early)
			var ownMap map[string]any
			_ = json.Unmarshal(own, &ownMap)
			want, _ := json.Marshal(ownMap)
			if string(got) != string(want) {
				t.Errorf("initialize answered early:\n%s\nthe server's answer:\n%s", got, want)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
