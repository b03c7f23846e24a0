package imagesafe

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/imagesafe/imagetest"
)

// defaultLimits are the limits e2b_read_file applies with its default configuration.
func defaultLimits() Limits {
	return Limits{MaxBytes: 768 << 10, MaxEdge: 1568, MaxPixels: DefaultMaxPixels, MaxDecodeBytes: DefaultMaxDecodeBytes}
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
		{"png", imagetest.Chart(t, 2, 2, false), PNG},
		{"jpeg", jpgBuf.Bytes(), JPEG},
		{"gif", gifBuf.Bytes(), GIF},
		{"webp", []byte("RIFF\x10\x00\x00\x00WEBPVP8L"), WebP},
		{"riff that is not webp", []byte("RIFF\x10\x00\x00\x00WAVEfmt "), ""},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), ""},
		{"text", []byte("\x89PN not quite"), ""},
		{"empty", nil, ""},
	} {
		if got := MIME(tt.data); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFitImage(t *testing.T) {
	lim := Limits{MaxBytes: 64 << 10, MaxEdge: 200, MaxPixels: 4_000_000, MaxDecodeBytes: 64 << 20}
	slots := NewSlots(1, time.Second)
	fit := func(data []byte, mime string, lim Limits) ([]byte, Info, error) {
		return Fit(t.Context(), data, mime, lim, slots, "alice")
	}
	small := imagetest.Chart(t, 120, 80, false)
	out, info, err := fit(small, PNG, lim)
	if err != nil || !bytes.Equal(out, small) || info.Scaled || info.Width != 120 || info.Height != 80 || info.Bytes != len(small) {
		t.Fatalf("an image within the limits must come back as it is: %+v %v", info, err)
	}

	// Too wide: scaled to the edge, aspect kept, still PNG.
	out, info, err = fit(imagetest.Chart(t, 800, 400, false), PNG, lim)
	if err != nil || !info.Scaled || info.Width != 200 || info.Height != 100 || info.SourceWidth != 800 || info.MIMEType != PNG {
		t.Fatalf("wide image: %+v %v", info, err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(out)); err != nil || cfg.Width != 200 || cfg.Height != 100 || len(out) != info.Bytes {
		t.Fatalf("scaled output: %+v %v", cfg, err)
	}

	// Within the edge but over the bytes: noise does not compress, so it ends up smaller, as a JPEG if need be.
	noisy := imagetest.Chart(t, 200, 200, true)
	tight := Limits{MaxBytes: len(noisy) / 4, MaxEdge: 200, MaxPixels: 4_000_000, MaxDecodeBytes: 64 << 20}
	out, info, err = fit(noisy, PNG, tight)
	if err != nil || !info.Scaled || len(out) > tight.MaxBytes || len(out) != info.Bytes {
		t.Fatalf("noisy image: %d bytes, %+v %v", len(out), info, err)
	}
	if _, _, err := image.Decode(bytes.NewReader(out)); err != nil {
		t.Fatalf("scaled noisy image does not decode: %v", err)
	}

	// A header claiming a huge canvas is refused before anything is decoded.
	_, _, err = fit(imagetest.PNGHeaderOnly(100_000, 100_000), PNG, lim)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "100000×100000 pixels") {
		t.Fatalf("decompression bomb: %v", err)
	}
	// Magic bytes and nothing valid after them.
	if _, _, err := fit([]byte("\x89PNG\r\n\x1a\ngarbage"), PNG, lim); err == nil || !strings.Contains(err.Error(), "not a valid one") {
		t.Fatalf("broken PNG: %v", err)
	}
	// A valid header and nothing after it: refused before the decode.
	broken := imagetest.PNGHeaderOnly(400, 400)
	if _, _, err := fit(broken, PNG, lim); err == nil || errors.As(err, &tooLarge) {
		t.Fatalf("PNG without pixel data: %v", err)
	}
}

// BenchmarkFitImage measures what scaling costs a call: a 3000×2000 chart-like PNG brought down to the defaults.
func BenchmarkFitImage(b *testing.B) {
	src := imagetest.Chart(b, 3000, 2000, false)
	lim := defaultLimits()
	slots := NewSlots(1, time.Second)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, info, err := Fit(b.Context(), src, PNG, lim, slots, "alice"); err != nil || !info.Scaled {
			b.Fatal(info, err)
		}
	}
}

// imageBomb is one crafted file and the words its refusal must contain.
type imageBomb struct {
	name, mime string
	data       []byte
	want       string
}

func imageBombs() []imageBomb {
	return []imageBomb{
		// The file of the finding: 48 bytes, a 1600×1 canvas and a 16383×16383 lossy frame behind it.
		{"webp lossy frame beyond its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0, 1600, 1), imagetest.VP8Frame(16383, 16383)), "16383×16383 pixels, not the 1600×1 of its canvas"},
		{"webp lossless frame beyond its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0, 1600, 1), imagetest.VP8LFrame(16384, 16384)), "16384×16384 pixels, not the 1600×1 of its canvas"},
		// Within the limits, so shown as it is: the model's client would decode the frame.
		{"webp frame beyond a small canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0, 64, 64), imagetest.VP8Frame(16383, 16383)), "not the 64×64 of its canvas"},
		{"webp alpha over a frame beyond its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0x10, 1600, 1), imagetest.RIFFChunk("ALPH", []byte{0}), imagetest.VP8Frame(16383, 16383)), "not the 1600×1 of its canvas"},
		{"webp animation frame beyond its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0x02, 64, 64), imagetest.RIFFChunk("ANIM", make([]byte, 6)),
			imagetest.AnimFrame(0, 0, 64, 64, imagetest.VP8Frame(16383, 16383))), "frame 1 is 16383×16383 pixels, not the 64×64"},
		{"webp animation frame off its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0x02, 64, 64), imagetest.RIFFChunk("ANIM", make([]byte, 6)),
			imagetest.AnimFrame(0, 0, 64, 64, imagetest.VP8Frame(64, 64)), imagetest.AnimFrame(16, 0, 16000, 64, imagetest.VP8Frame(16000, 64))), "frame 2 of 16000×64 at (16, 0) falls outside the 64×64 canvas"},
		// Each edge is checked on its own: a frame as wide as its canvas but taller, or below it.
		{"webp frame taller than its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0, 64, 64), imagetest.VP8Frame(64, 16000)), "its frame is 64×16000 pixels, not the 64×64 of its canvas"},
		{"webp animation frame below its canvas", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0x02, 64, 64), imagetest.RIFFChunk("ANIM", make([]byte, 6)),
			imagetest.AnimFrame(0, 0, 64, 64, imagetest.VP8Frame(64, 64)), imagetest.AnimFrame(0, 16, 64, 16000, imagetest.VP8Frame(64, 16000))), "frame 2 of 64×16000 at (0, 16) falls outside the 64×64 canvas"},
		// The file of the finding: 164 KB, a 2000×1 frame whose entropy image names group 65535, for 500 tiles.
		{"webp lossless naming more groups than tiles", WebP, imagetest.VP8LGroups(2000, 1, 65535), "names 65536 entropy groups for its 500 tiles"},
		// As many groups as tiles, 170 MiB of them, which the decoder allocates before the first pixel.
		{"webp lossless groups over the memory bound", WebP, imagetest.VP8LGroups(2000, 1000, 65535), "of memory to decode"},
		{"webp canvas whose frame is missing", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0, 1600, 1)), "no frame"},
		{"webp chunk past the end", WebP, imagetest.WebPFile(imagetest.WebPCanvas(0, 1600, 1), []byte("VP8 \xff\xff\xff\x00")), "runs past the end"},
		// Go's GIF decoder refuses a first frame beyond the screen, but decodes only that one: a later frame is the
		// model's client's to decode.
		{"gif frame beyond its screen", GIF, imagetest.GIFFile(1600, 1, imagetest.GIFFrame(0, 0, 65535, 65535)), "frame 1 of 65535×65535 at (0, 0) falls outside the 1600×1 screen"},
		{"gif later frame beyond a small screen", GIF, imagetest.GIFFile(10, 10, imagetest.GIFFrame(0, 0, 10, 10), imagetest.GIFFrame(5, 5, 65000, 65000)), "frame 2 of 65000×65000 at (5, 5)"},
		{"gif later frame right of its screen", GIF, imagetest.GIFFile(10, 10, imagetest.GIFFrame(0, 0, 10, 10), imagetest.GIFFrame(5, 0, 65000, 10)), "frame 2 of 65000×10 at (5, 0)"},
		{"gif later frame below its screen", GIF, imagetest.GIFFile(10, 10, imagetest.GIFFrame(0, 0, 10, 10), imagetest.GIFFrame(0, 5, 10, 65000)), "frame 2 of 10×65000 at (0, 5)"},
		{"gif block past the end", GIF, append(imagetest.GIFFile(1600, 1)[:19], 0x2c, 1), "ends inside"},
		// 5000×5000 RGBA needs 100 MB decoded; deflate expands at most 1032 times, so 32 bytes cannot hold it, and
		// the decoder would allocate all of it before finding out.
		{"png pixel data too short for its size", PNG, imagetest.PNGFile(5000, 5000, 8, 6, imagetest.Noise(32)), "cannot hold 5000×5000 pixels"},
		// 20 megapixels within the pixel bound, but at 16 bits a sample the decoder holds 8 bytes a pixel.
		{"png of 16-bit samples over the memory bound", PNG, imagetest.PNGFile(5000, 4000, 16, 6, imagetest.Noise(160_000_000/1000)), "of memory to decode"},
		{"png chunk past the end", PNG, imagetest.PNGFile(5000, 5000, 8, 6, nil)[:40], "runs past the end"},
		// A progressive JPEG keeps 64 coefficients of 4 bytes per 8×8 block of each component: 12 bytes a pixel at
		// full-size chroma, 300 MB for 5000×5000, allocated at its first scan.
		{"jpeg progressive over the memory bound", JPEG, imagetest.JPEGFile(0xc2, 5000, 5000, []byte{0x11, 0x11, 0x11}), "of memory to decode"},
		// Each scan is a pass over every block of the image: a few bytes each, thousands of passes.
		{"jpeg of thousands of scans", JPEG, imagetest.JPEGScanBomb(4000, 4000, 5000), "5001 scans"},
		{"jpeg with two frames", JPEG, append(imagetest.JPEGHeaders(0xc0, 1600, 1, []byte{0x11}), imagetest.JPEGFile(0xc2, 16000, 16000, []byte{0x11})[2:]...), "more than one frame"},
	}
}

// TestImageBombsRefused feeds each crafted file to Fit: each is refused without allocating the image it hides.
func TestImageBombsRefused(t *testing.T) {
	lim := defaultLimits()
	slots := NewSlots(1, time.Second)
	for _, b := range imageBombs() {
		t.Run(b.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			out, info, err := Fit(t.Context(), b.data, b.mime, lim, slots, "alice")
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("%d-byte file: got %d bytes %+v, error %v; want a refusal saying %q", len(b.data), len(out), info, err, b.want)
			}
			// A generous bound, to catch a decode of the hidden image (a gigabyte) under any load; what a refusal
			// costs in time is BenchmarkRefuseImageBomb's to measure.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
				t.Errorf("refusing it allocated %d MiB", alloc>>20)
			}
			t.Logf("%d bytes refused in %v: %v", len(b.data), took, err)
		})
	}
}

// BenchmarkRefuseImageBomb measures what refusing the crafted files costs a call.
func BenchmarkRefuseImageBomb(b *testing.B) {
	lim := defaultLimits()
	slots := NewSlots(1, time.Second)
	for _, bomb := range imageBombs() {
		b.Run(strings.ReplaceAll(bomb.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Fit(b.Context(), bomb.data, bomb.mime, lim, slots, "alice"); err == nil {
					b.Fatal("not refused")
				}
			}
		})
	}
}

// TestImagesOfEveryFormatStillShown: the checks pass the files real encoders write, scaled or not.
func TestImagesOfEveryFormatStillShown(t *testing.T) {
	lim := Limits{MaxBytes: 64 << 10, MaxEdge: 200, MaxPixels: 4_000_000, MaxDecodeBytes: 64 << 20}
	slots := NewSlots(1, time.Second)
	for name, f := range map[string]struct {
		data []byte
		mime string
	}{
		"png":              {imagetest.Chart(t, 800, 400, false), PNG},
		"jpeg":             {imagetest.ChartJPEG(t, 800, 400), JPEG},
		"gif":              {imagetest.ChartGIF(t, 800, 400), GIF},
		"webp lossless":    {testWebP(t, "gopher.lossless.webp"), WebP},
		"webp lossy alpha": {testWebP(t, "rose.lossy-alpha.webp"), WebP},
	} {
		out, info, err := Fit(t.Context(), f.data, f.mime, lim, slots, "alice")
		if err != nil || len(out) == 0 || max(info.Width, info.Height) > lim.MaxEdge {
			t.Errorf("%s: %+v %v", name, info, err)
		}
	}
}

// TestImageSlotsFairPerOwner: an owner whose image is being decoded holds its own slot, not the others': another
// owner's image is scaled meanwhile, and the first owner's next image waits its turn, then is refused as busy.
func TestImageSlotsFairPerOwner(t *testing.T) {
	slots := NewSlots(2, 200*time.Millisecond)
	release, err := slots.Acquire(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{MaxBytes: 64 << 10, MaxEdge: 200, MaxPixels: 4_000_000, MaxDecodeBytes: 64 << 20}
	chart := imagetest.Chart(t, 2000, 2000, false)
	if _, info, err := Fit(t.Context(), chart, PNG, lim, slots, "bob"); err != nil || !info.Scaled {
		t.Fatalf("bob's chart while alice's image is decoded: %+v %v", info, err)
	}
	// The slots' own bound (200ms) ends this wait; the test's bound only stops a hang if that bound is gone.
	bounded, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, _, err = Fit(bounded, chart, PNG, lim, slots, "alice")
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("alice's second image while her first is decoded: %v, want busy within the slots' own wait", err)
	}
	release()
	if _, info, err := Fit(t.Context(), chart, PNG, lim, slots, "alice"); err != nil || !info.Scaled {
		t.Fatalf("alice's image after hers is done: %+v %v", info, err)
	}
}

// A decode's memory is given back when it is done, so that the next one (the other slot's, or the same owner's
// next image) costs one decode more than the server at rest, not one more than every decode before it left
// behind for the collector: two owners each reading a 128 MiB image must not take the server to half a gigabyte.
func TestDecodeGivesItsMemoryBack(t *testing.T) {
	big := imagetest.Chart(t, 4000, 3000, false) // 48 MB decoded
	lim := Limits{MaxBytes: 64 << 10, MaxEdge: 400, MaxPixels: DefaultMaxPixels, MaxDecodeBytes: DefaultMaxDecodeBytes}
	slots := NewSlots(1, time.Second)
	held := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapSys - m.HeapReleased
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := held()
	for i := range 2 {
		if _, info, err := Fit(t.Context(), big, PNG, lim, slots, "alice"); err != nil || !info.Scaled {
			t.Fatalf("the chart: %+v %v", info, err)
		}
		if after := held(); after > before+16<<20 {
			t.Errorf("after decode %d the heap holds %d MiB of the system's memory, %d MiB more than before it", i+1, after>>20, (after-before)>>20)
		}
	}
}
