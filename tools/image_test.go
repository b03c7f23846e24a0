package tools

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/imagesafe/imagetest"
)

// imageOf returns the one image content of a result.
func imageOf(t *testing.T, res *mcp.CallToolResult) ([]byte, string) {
	t.Helper()
	var images []mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(mcp.ImageContent); ok {
			images = append(images, ic)
		}
	}
	if len(images) != 1 {
		t.Fatalf("%d image contents in %v", len(images), res.Content)
	}
	data, err := base64.StdEncoding.DecodeString(images[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	return data, images[0].MIMEType
}

func TestReadImage(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		up := func(p string, data []byte) {
			if _, err := e.envdOf(t, "alice", id).Upload(t.Context(), p, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
		}
		chart := imagetest.Chart(t, 300, 200, false)
		// No extension: the content decides.
		up("/home/user/chart", chart)
		res := s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "chart"})
		fields := mustOK(t, "e2b_read_file", res)
		got, mime := imageOf(t, res)
		if !bytes.Equal(got, chart) || mime != imagesafe.PNG {
			t.Fatalf("image content: %d bytes %s, want the %d bytes of the PNG", len(got), mime, len(chart))
		}
		img, _ := fields["image"].(map[string]any)
		if fields["content"] != "" || fields["binary"] != true || img["mime_type"] != imagesafe.PNG || num(img["width"]) != 300 || img["scaled"] != false {
			t.Fatalf("fields: %v", fields)
		}

		// Over the edge: scaled, and the fields say so.
		up("big.png", imagetest.Chart(t, 900, 300, false))
		res = s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "big.png"})
		fields = mustOK(t, "e2b_read_file", res)
		got, _ = imageOf(t, res)
		cfg, err := png.DecodeConfig(bytes.NewReader(got))
		img, _ = fields["image"].(map[string]any)
		if err != nil || cfg.Width != 400 || img["scaled"] != true || num(img["source_width"]) != 900 {
			t.Fatalf("scaled: %+v %v %v", cfg, err, fields)
		}
		wantContains(t, fields["note"].(string), "900×300", "scaled down to 400×133")

		// A file over the source limit is refused with advice, not truncated.
		up("huge.png", append(imagetest.Chart(t, 10, 10, false), make([]byte, 70<<10)...))
		wantContains(t, s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "huge.png"}),
			"'/home/user/huge.png' is a PNG image of", "over the 65536 bytes", "smaller copy")

		// SVG is text; offset/limit reads an image's bytes as lines, as before.
		svg := `<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>` + "\n"
		up("pic.svg", []byte(svg))
		res = s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "pic.svg"})
		if fields = mustOK(t, "e2b_read_file", res); fields["content"] != svg || len(res.Content) != 1 {
			t.Fatalf("svg: %v", fields)
		}
		res = s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "chart", "offset": 1, "limit": 1})
		if fields = mustOK(t, "e2b_read_file", res); fields["image"] != nil || len(res.Content) != 1 {
			t.Fatalf("explicit range of an image: %v", fields)
		}
		// A frame larger than its canvas is refused before it is decoded.
		up("bomb.webp", imagetest.WebPFile(imagetest.WebPCanvas(0, 1600, 1), imagetest.VP8Frame(16383, 16383)))
		wantContains(t, s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "bomb.webp"}),
			"'/home/user/bomb.webp' cannot be shown", "its frame is 16383×16383 pixels, not the 1600×1 of its canvas")
		// A file that only starts like a PNG gets a clear refusal.
		up("fake.png", []byte("\x89PNG\r\n\x1a\nnot really"))
		wantContains(t, s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "fake.png"}),
			"cannot be shown", "not a valid one")
	}, func(c *Config) { c.ImageMaxEdge = 400; c.ImageSourceLimitBytes = 64 << 10 })
}
