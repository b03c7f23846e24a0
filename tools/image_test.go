package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// testPNG draws a w×h chart-like picture: a white canvas with coloured bars and some noise, so that it does not
// compress to nothing.
func testPNG(t testing.TB, w, h int, noise bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBA{255, 255, 255, 255}
			if bar := x * 5 / max(w, 1); y > h-(bar+1)*h/6 {
				c = color.NRGBA{uint8(40 * bar), 90, 200, 255}
			}
			if noise {
				c.R ^= uint8(r.IntN(64))
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// defaultImageLimits are the limits e2b_read_file applies with the default configuration.
func defaultImageLimits() imageLimits {
	return imageLimits{maxBytes: DefaultImageLimitBytes, maxEdge: DefaultImageMaxEdge, maxPixels: maxImagePixels, maxDecodeBytes: maxImageDecodeBytes}
}

// testJPEG is testPNG's picture as a JPEG, testGIF as a GIF.
func testJPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(testPNG(t, w, h, false)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testGIF(t testing.TB, w, h int) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(testPNG(t, w, h, false)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := gif.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testWebP is a WebP file of testdata (from golang.org/x/image's tests: Go has no WebP encoder).
func testWebP(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// pngHeaderOnly is the start of a PNG that claims w×h pixels: enough for DecodeConfig, nothing to decode.
func pngHeaderOnly(w, h uint32) []byte {
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk := append([]byte("IHDR"), ihdr[:]...)
	out := []byte("\x89PNG\r\n\x1a\n")
	out = binary.BigEndian.AppendUint32(out, 13)
	out = append(out, chunk...)
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(chunk))
	return append(out, bytes.Repeat([]byte{0}, 64)...)
}

func TestImageMIME(t *testing.T) {
	var gifBuf, jpgBuf bytes.Buffer
	small := image.NewPaletted(image.Rect(0, 0, 2, 2), []color.Color{color.Black, color.White})
	if err := gif.Encode(&gifBuf, small, nil); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpgBuf, small, nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"png", testPNG(t, 2, 2, false), mimePNG},
		{"jpeg", jpgBuf.Bytes(), mimeJPEG},
		{"gif", gifBuf.Bytes(), mimeGIF},
		{"webp", []byte("RIFF\x10\x00\x00\x00WEBPVP8L"), mimeWebP},
		{"riff that is not webp", []byte("RIFF\x10\x00\x00\x00WAVEfmt "), ""},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), ""},
		{"text", []byte("\x89PN not quite"), ""},
		{"empty", nil, ""},
	} {
		if got := imageMIME(tt.data); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFitImage(t *testing.T) {
	lim := imageLimits{maxBytes: 64 << 10, maxEdge: 200, maxPixels: 4_000_000, maxDecodeBytes: 64 << 20}
	slots := newScalingSlots(1, time.Second)
	fit := func(data []byte, mime string, lim imageLimits) ([]byte, imageInfo, error) {
		return fitImage(t.Context(), data, mime, lim, slots, "alice")
	}
	small := testPNG(t, 120, 80, false)
	out, info, err := fit(small, mimePNG, lim)
	if err != nil || !bytes.Equal(out, small) || info.Scaled || info.Width != 120 || info.Height != 80 || info.Bytes != len(small) {
		t.Fatalf("an image within the limits must come back as it is: %+v %v", info, err)
	}

	// Too wide: scaled to the edge, aspect kept, still PNG.
	out, info, err = fit(testPNG(t, 800, 400, false), mimePNG, lim)
	if err != nil || !info.Scaled || info.Width != 200 || info.Height != 100 || info.SourceWidth != 800 || info.MIMEType != mimePNG {
		t.Fatalf("wide image: %+v %v", info, err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(out)); err != nil || cfg.Width != 200 || cfg.Height != 100 || len(out) != info.Bytes {
		t.Fatalf("scaled output: %+v %v", cfg, err)
	}

	// Within the edge but over the bytes: noise does not compress, so it ends up smaller, as a JPEG if need be.
	noisy := testPNG(t, 200, 200, true)
	tight := imageLimits{maxBytes: len(noisy) / 4, maxEdge: 200, maxPixels: 4_000_000, maxDecodeBytes: 64 << 20}
	out, info, err = fit(noisy, mimePNG, tight)
	if err != nil || !info.Scaled || len(out) > tight.maxBytes || len(out) != info.Bytes {
		t.Fatalf("noisy image: %d bytes, %+v %v", len(out), info, err)
	}
	if _, _, err := image.Decode(bytes.NewReader(out)); err != nil {
		t.Fatalf("scaled noisy image does not decode: %v", err)
	}

	// A header claiming a huge canvas is refused before anything is decoded.
	_, _, err = fit(pngHeaderOnly(100_000, 100_000), mimePNG, lim)
	var tooLarge *errImageTooLarge
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "100000×100000 pixels") {
		t.Fatalf("decompression bomb: %v", err)
	}
	// Magic bytes and nothing valid after them.
	if _, _, err := fit([]byte("\x89PNG\r\n\x1a\ngarbage"), mimePNG, lim); err == nil || !strings.Contains(err.Error(), "not a valid one") {
		t.Fatalf("broken PNG: %v", err)
	}
	// A valid header and nothing after it: refused before the decode.
	broken := pngHeaderOnly(400, 400)
	if _, _, err := fit(broken, mimePNG, lim); err == nil || errors.As(err, &tooLarge) {
		t.Fatalf("PNG without pixel data: %v", err)
	}
}

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
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		up := func(p string, data []byte) {
			if _, err := e.envdOf(t, "alice", id).Upload(t.Context(), p, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
		}
		chart := testPNG(t, 300, 200, false)
		// No extension: the content decides.
		up("/home/user/chart", chart)
		res := s.call(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "chart"})
		fields := mustOK(t, "e2b_read_file", res)
		got, mime := imageOf(t, res)
		if !bytes.Equal(got, chart) || mime != mimePNG {
			t.Fatalf("image content: %d bytes %s, want the %d bytes of the PNG", len(got), mime, len(chart))
		}
		img, _ := fields["image"].(map[string]any)
		if fields["content"] != "" || fields["binary"] != true || img["mime_type"] != mimePNG || num(img["width"]) != 300 || img["scaled"] != false {
			t.Fatalf("fields: %v", fields)
		}

		// Over the edge: scaled, and the fields say so.
		up("big.png", testPNG(t, 900, 300, false))
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
		up("huge.png", append(testPNG(t, 10, 10, false), make([]byte, 70<<10)...))
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
		up("bomb.webp", webpFile(webpCanvas(0, 1600, 1), vp8Frame(16383, 16383)))
		wantContains(t, s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "bomb.webp"}),
			"'/home/user/bomb.webp' cannot be shown", "its frame is 16383×16383 pixels, not the 1600×1 of its canvas")
		// A file that only starts like a PNG gets a clear refusal.
		up("fake.png", []byte("\x89PNG\r\n\x1a\nnot really"))
		wantContains(t, s.fail(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "fake.png"}),
			"cannot be shown", "not a valid one")
	}, func(c *Config) { c.ImageMaxEdge = 400; c.ImageSourceLimitBytes = 64 << 10 })
}

// BenchmarkFitImage measures what scaling costs a call: a 3000×2000 chart-like PNG brought down to the defaults.
func BenchmarkFitImage(b *testing.B) {
	src := testPNG(b, 3000, 2000, false)
	lim := defaultImageLimits()
	slots := newScalingSlots(1, time.Second)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, info, err := fitImage(b.Context(), src, mimePNG, lim, slots, "alice"); err != nil || !info.Scaled {
			b.Fatal(info, err)
		}
	}
}
