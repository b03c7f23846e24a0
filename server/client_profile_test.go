package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// connectAs connects an in-process client that introduces itself as name.
func connectAs(t *testing.T, srv *Server, version, name string) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClientWithOptions(srv.mcp, client.WithProtocolVersion(version))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// A result is sized to what the calling client shows its model, in both protocol eras: the client named by its
// clientInfo (Codex hands its model at most about 48,000 characters, Copilot CLI about 20,000, a client the
// server does not know gets the safe default), or the one --client-profile names, whoever calls.
func TestResultSizedToTheClient(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			for _, tc := range []struct {
				name, profile string
				limit         int
			}{
				{"codex-mcp-client", "", 40_000},
				{"github-copilot-cli", "", 18_000},
				{"some-new-client", "", 18_000},
				{"codex-mcp-client", "claude-code", 45_000},
			} {
				f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.ClientProfile = tc.profile }})
				c := connectAs(t, f.srv, version, tc.name)
				id := createSandbox(t, c)
				res := callTool(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 200000"})
				text := len(resultText(res))
				if res.IsError || text > tc.limit || text < tc.limit*8/10 {
					t.Errorf("%s (profile %q): a result of %d characters, want at most %d and most of it", tc.name, tc.profile, text, tc.limit)
				}
			}
		})
	}
}

// pngBase64 is a 96×64 PNG.
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAGAAAABACAIAAABqVuVZAAAAo0lEQVR4nOzQQRGDUADFwNfpF4N/FcjCAEMM7B4iIOfete236WvP/uODQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDAoGBYOCQcGgYFAwKBgUDApPAAAA//+PNwLdwWFWKAAAAABJRU5ErkJggg=="

// A client that hands its model only structuredContent (Codex, Copilot CLI) gets e2b_read_file without an
// outputSchema, and an image read without structuredContent, so that the image reaches its model; a client that
// reads the text content gets both as before. In both protocol eras.
func TestImagesReachStructuredOnlyClients(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			for _, tc := range []struct {
				name       string
				structured bool
			}{{"codex-mcp-client", false}, {"claude-code", true}} {
				c := connectAs(t, f.srv, version, tc.name)
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				for _, tool := range list.Tools {
					schema, _ := json.Marshal(tool)
					declares := strings.Contains(string(schema), `"outputSchema"`)
					want := tc.structured || (tool.Name != "e2b_read_file" && tool.Name != "e2b_run_code")
					if declares != want {
						t.Errorf("%s: %s declares an outputSchema: %v, want %v", tc.name, tool.Name, declares, want)
					}
				}
				id := createSandbox(t, c)
				mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo " + pngBase64 + " | base64 -d > red.png"})
				res := callTool(t, c, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "red.png"})
				images := 0
				for _, content := range res.Content {
					if _, ok := content.(mcp.ImageContent); ok {
						images++
					}
				}
				if res.IsError || images != 1 || (res.StructuredContent != nil) != tc.structured {
					t.Errorf("%s: an image read: error %v, %d images, structuredContent %v", tc.name, res.IsError, images, res.StructuredContent != nil)
				}
			}
		})
	}
}

// Where --result-limit is above what a client keeps of a result, the tools tell it (Claude Code honours
// _meta "anthropic/maxResultSizeChars"); at its own budget nothing is declared.
func TestMaxResultSizeDeclared(t *testing.T) {
	for _, tc := range []struct {
		limit int
		want  any
	}{{0, nil}, {80_000, float64(80_000)}} {
		f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ResultLimit = tc.limit }})
		c := connectAs(t, f.srv, eras[0], "claude-code")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range list.Tools {
			var got any
			if tool.Meta != nil {
				got = tool.Meta.AdditionalFields["anthropic/maxResultSizeChars"]
			}
			if got != tc.want {
				t.Errorf("--result-limit %d: %s declares maxResultSizeChars %v, want %v", tc.limit, tool.Name, got, tc.want)
			}
		}
	}
}

// anyLinkRE finds a link in a note.
var anyLinkRE = regexp.MustCompile(`https?://[^\s"]+`)

// A client that does not hand a tool's images to its model (Copilot CLI) is told so in an image read's note,
// never that the image is "shown", with a link that downloads the file for the user; a client that shows images
// gets no link.
func TestUnseenImageNamesALink(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for _, tc := range []struct {
		name string
		seen bool
	}{{"github-copilot-cli", false}, {"codex-mcp-client", true}, {"claude-code", true}} {
		c := connectAs(t, f.srv, eras[0], tc.name)
		id := createSandbox(t, c)
		mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo " + pngBase64 + " | base64 -d > red.png"})
		res := callTool(t, c, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "red.png"})
		var out struct{ Note string }
		if err := json.Unmarshal([]byte(resultText(res)), &out); err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tc.name, err, resultText(res))
		}
		link := anyLinkRE.FindString(out.Note)
		if tc.seen {
			if link != "" || !strings.Contains(out.Note, "shown as image content") {
				t.Errorf("%s shows images: note %q", tc.name, out.Note)
			}
			continue
		}
		if strings.Contains(out.Note, "shown") || !strings.Contains(out.Note, "you do not see it") || link == "" {
			t.Fatalf("%s does not show images: note %q", tc.name, out.Note)
		}
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, _ := base64.StdEncoding.DecodeString(pngBase64)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s: the note's link answered %d with %d bytes, want the %d of the PNG", tc.name, resp.StatusCode, len(got), len(want))
		}
	}
}

// A chart from e2b_run_code, for a client that does not hand a tool's images to its model (Copilot CLI), is
// saved in the sandbox, and the result says what it was, where it is and gives a link that downloads it; a
// client that shows images gets the image and no such note.
func TestUnseenChartNamesALink(t *testing.T) {
	if err := emulator.CodeInterpreterAvailable(); err != nil {
		optional.Missing(t, err.Error())
	}
	f := newFixture(t, fixtureOpts{emulator: e2btest.Options{CodeInterpreter: true}})
	code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('Squares')\nplt.show()"
	for _, tc := range []struct {
		name string
		seen bool
	}{{"github-copilot-cli", false}, {"claude-code", true}} {
		c := connectAs(t, f.srv, eras[0], tc.name)
		id, _ := mustOK(t, c, "e2b_create_sandbox", map[string]any{"template": "code-interpreter-v1"})["sandbox_id"].(string)
		res := callTool(t, c, "e2b_run_code", map[string]any{"sandbox_id": id, "code": code})
		var out struct {
			Results []struct{ Note string }
		}
		if err := json.Unmarshal([]byte(resultText(res)), &out); err != nil || res.IsError || len(out.Results) != 1 {
			t.Fatalf("%s: %v %s", tc.name, err, resultText(res))
		}
		note := out.Results[0].Note
		link := anyLinkRE.FindString(note)
		if tc.seen {
			if link != "" || strings.Contains(note, "saved to") {
				t.Errorf("%s shows images: note %q", tc.name, note)
			}
			continue
		}
		for _, want := range []string{"chart", "PNG image", "saved to /tmp/e2b-mcp/chart-", "you do not see it"} {
			if !strings.Contains(note, want) {
				t.Errorf("%s: the note lacks %q: %q", tc.name, want, note)
			}
		}
		if link == "" {
			t.Fatalf("%s: no link in the note %q", tc.name, note)
		}
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(got, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s: the note's link answered %d with %d bytes, want the chart's PNG", tc.name, resp.StatusCode, len(got))
		}
	}
}
