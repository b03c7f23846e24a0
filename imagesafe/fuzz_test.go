package imagesafe

import (
	"bytes"
	"image"
	"runtime"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/imagesafe/imagetest"
)

// The header walks read bytes from a sandbox, which anyone's code may have written. Each format's fuzz target
// checks, on any bytes, that the walk never panics or hangs, and that a file it lets through (within the pixel
// bound Fit checks before it) decodes within the memory the walk said: the walk's purpose is that nothing
// costlier than it says gets decoded. Seeds: files of real encoders and the small crafted files of imageBombs.

// fuzzPixels bounds the images a fuzz target decodes, so that each input takes milliseconds.
const fuzzPixels = 1 << 20

// fuzzSlack is what a decoder allocates whatever the image (buffered readers, inflate windows, tables).
const fuzzSlack = 1 << 20

func fuzzHeader(f *testing.F, mime string, seeds ...[]byte) {
	for _, b := range imageBombs() {
		if b.mime == mime && len(b.data) <= 4<<10 { // a fuzzer mutates small inputs fast
			seeds = append(seeds, b.data)
		}
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if MIME(data) != mime {
			return
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > DefaultMaxPixels {
			return // Fit refuses it before any walk
		}
		h, err := readHeader(data, mime)
		if err != nil || cfg.Width*cfg.Height > fuzzPixels || h.width != cfg.Width || h.height != cfg.Height ||
			h.decodeBytes > 64<<20 {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, _ = image.Decode(bytes.NewReader(data))
		runtime.ReadMemStats(&after)
		if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > h.decodeBytes+fuzzSlack {
			t.Errorf("a %d×%d %s said to cost %d bytes allocated %d to decode", h.width, h.height, FormatName(mime), h.decodeBytes, alloc)
		}
	})
}

func FuzzWebPHeader(f *testing.F) {
	fuzzHeader(f, WebP, testWebP(f, "gopher.lossless.webp"), testWebP(f, "rose.lossy-alpha.webp"),
		imagetest.VP8LGroups(64, 64, 255), imagetest.WebPFile(imagetest.VP8Frame(64, 64)))
}

func FuzzPNGHeader(f *testing.F) {
	fuzzHeader(f, PNG, imagetest.Chart(f, 64, 48, true), imagetest.PNGHeaderOnly(32, 32))
}

func FuzzJPEGHeader(f *testing.F) {
	fuzzHeader(f, JPEG, imagetest.ChartJPEG(f, 64, 48), imagetest.JPEGFile(0xc2, 64, 64, []byte{0x22, 0x11, 0x11}))
}

func FuzzGIFHeader(f *testing.F) {
	fuzzHeader(f, GIF, imagetest.ChartGIF(f, 64, 48), imagetest.GIFFile(10, 10, imagetest.GIFFrame(0, 0, 10, 10), imagetest.GIFFrame(2, 2, 4, 4)))
}
