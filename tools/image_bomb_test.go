package tools

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The crafted files below each claim a small or ordinary image in the header that image.DecodeConfig reads, and
// hide a far larger (or far costlier) one from it: a frame larger than its canvas, a progressive JPEG whose
// coefficients outweigh its pixels, a PNG whose pixel data cannot hold what it claims. They are built here, byte
// by byte, so that each one's trick is spelled out beside it.

func le16(v int) []byte { return []byte{byte(v), byte(v >> 8)} }
func le24(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }

// webpFile wraps chunks in the RIFF container of a WebP file.
func webpFile(chunks ...[]byte) []byte {
	body := []byte("WEBP")
	for _, c := range chunks {
		body = append(body, c...)
	}
	return append(append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...), body...)
}

// riffChunk is one RIFF chunk: its FourCC, length, body and the pad byte of an odd length.
func riffChunk(id string, body []byte) []byte {
	out := append([]byte(id), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	out = append(out, body...)
	if len(body)%2 == 1 {
		out = append(out, 0)
	}
	return out
}

// webpCanvas is a VP8X chunk declaring a w×h canvas with the given feature flags (0x10 alpha, 0x02 animation).
func webpCanvas(flags byte, w, h int) []byte {
	return riffChunk("VP8X", append(append([]byte{flags, 0, 0, 0}, le24(w-1)...), le24(h-1)...))
}

// vp8Frame is a lossy key frame of w×h pixels with almost no data: a first partition of 8 zero bytes. The decoder
// reads a short partition as zeros and decodes every macroblock anyway, allocating the frame at its own size.
func vp8Frame(w, h int) []byte {
	const firstPartition = 8
	tag := []byte{0x10 | firstPartition&7<<5, firstPartition >> 3, 0} // key frame, shown
	hdr := append(append(tag, 0x9d, 0x01, 0x2a), append(le16(w), le16(h)...)...)
	return riffChunk("VP8 ", append(hdr, make([]byte, firstPartition)...))
}

// vp8lFrame is a lossless frame's header for w×h pixels.
func vp8lFrame(w, h int) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	return riffChunk("VP8L", []byte{0x2f, byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)})
}

// animFrame is an ANMF chunk placing frame (a VP8 or VP8L chunk) of w×h at (x, y) of the canvas.
func animFrame(x, y, w, h int, frame []byte) []byte {
	hdr := append(append(append(append(le24(x/2), le24(y/2)...), le24(w-1)...), le24(h-1)...), 0, 0, 0, 0)
	return riffChunk("ANMF", append(hdr, frame...))
}

// gifFile is a GIF of a w×h logical screen with a two-colour palette and the given frames.
func gifFile(w, h int, frames ...[]byte) []byte {
	out := append(append(append([]byte("GIF89a"), le16(w)...), le16(h)...), 0x80, 0, 0, 0, 0, 0, 255, 255, 255)
	for _, f := range frames {
		out = append(out, f...)
	}
	return append(out, 0x3b)
}

// gifFrame is an image descriptor of w×h at (x, y) followed by LZW data of one clear and one end code.
func gifFrame(x, y, w, h int) []byte {
	out := append(append(append(append([]byte{0x2c}, le16(x)...), le16(y)...), le16(w)...), le16(h)...)
	return append(out, 0, 2, 2, 0x44, 0x01, 0)
}

// pngFile is a PNG of w×h pixels (bit depth and colour type as in IHDR) with idat as its compressed pixel data.
func pngFile(w, h int, depth, colorType byte, idat []byte) []byte {
	chunk := func(typ string, body []byte) []byte {
		c := append([]byte(typ), body...)
		out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		return binary.BigEndian.AppendUint32(append(out, c...), crc32.ChecksumIEEE(c))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	ihdr = append(ihdr, depth, colorType, 0, 0, 0)
	out := append([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr)...)
	return append(append(out, chunk("IDAT", idat)...), chunk("IEND", nil)...)
}

// jpegSegment is a JPEG marker segment: 0xFF, the marker, a 2-byte length and body.
func jpegSegment(marker byte, body []byte) []byte {
	return append([]byte{0xff, marker, byte((len(body) + 2) >> 8), byte(len(body) + 2)}, body...)
}

// jpegHeaders are a JPEG's SOI, a JFIF segment (after which image.DecodeConfig stops at the first frame), a
// quantisation table and the frame (marker sof: 0xc0 baseline, 0xc2 progressive)
// of w×h pixels in components of the given sampling factors (0x11 full size, 0x22 luma over quarter-size
// chroma), and Huffman tables of one code each: DC difference 0, and AC run of 2^14 or more empty blocks.
func jpegHeaders(sof byte, w, h int, sampling []byte) []byte {
	frame := []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(len(sampling))}
	for i, s := range sampling {
		frame = append(frame, byte(i+1), s, 0)
	}
	oneCode := func(class, symbol byte) []byte {
		return append(append([]byte{class << 4, 1}, make([]byte, 15)...), symbol)
	}
	out := append([]byte{0xff, 0xd8}, jpegSegment(0xe0, []byte("JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"))...)
	out = append(out, jpegSegment(0xdb, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...))...)
	out = append(out, jpegSegment(sof, frame)...)
	return append(append(out, jpegSegment(0xc4, oneCode(0, 0x00))...), jpegSegment(0xc4, oneCode(1, 0xe0))...)
}

// jpegFile is jpegHeaders followed by one DC scan over every component (for a progressive file, where the
// decoder allocates its coefficients) with a few bytes of data, and EOI.
func jpegFile(sof byte, w, h int, sampling []byte) []byte {
	scan := []byte{byte(len(sampling))}
	for i := range sampling {
		scan = append(scan, byte(i+1), 0)
	}
	out := append(jpegHeaders(sof, w, h, sampling), jpegSegment(0xda, append(scan, 0, 0, 0))...)
	return append(out, 0x00, 0x00, 0xff, 0xd9)
}

// jpegScanBomb is a progressive greyscale JPEG of w×h pixels that is valid to the end: a DC scan of every block
// (one bit each), then scans AC scans, each a pass over every block in a few bytes (runs of 32768 empty
// blocks, 15 bits apiece).
func jpegScanBomb(w, h, scans int) []byte {
	blocks := ((w + 7) / 8) * ((h + 7) / 8)
	out := jpegHeaders(0xc2, w, h, []byte{0x11})
	out = append(out, jpegSegment(0xda, []byte{1, 1, 0x00, 0, 0, 0})...)
	out = append(out, make([]byte, (blocks+7)/8)...) // a 0 bit per block: DC difference 0
	// Each run is the code 0 and 14 one bits: 2^14 + 2^14-1 empty blocks after the one it starts at. The bits are
	// packed from the top, the last byte padded with ones, each 0xFF byte followed by a stuffed 0x00.
	var bits []bool
	for n := 0; n < blocks; n += 32768 {
		bits = append(append(bits, false), slices.Repeat([]bool{true}, 14)...)
	}
	var runs []byte
	for i := 0; i < len(bits); i += 8 {
		var b byte = 0xff
		for j := i; j < min(i+8, len(bits)); j++ {
			if !bits[j] {
				b &^= 0x80 >> (j - i)
			}
		}
		if runs = append(runs, b); b == 0xff {
			runs = append(runs, 0)
		}
	}
	for range scans {
		out = append(append(out, jpegSegment(0xda, []byte{1, 1, 0x00, 1, 63, 0})...), runs...)
	}
	return append(out, 0xff, 0xd9)
}

// noise is n bytes that do not compress: pixel data long enough to pass for an image's.
func noise(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
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
		{"webp lossy frame beyond its canvas", mimeWebP, webpFile(webpCanvas(0, 1600, 1), vp8Frame(16383, 16383)), "16383×16383 pixels, not the 1600×1 of its canvas"},
		{"webp lossless frame beyond its canvas", mimeWebP, webpFile(webpCanvas(0, 1600, 1), vp8lFrame(16384, 16384)), "16384×16384 pixels, not the 1600×1 of its canvas"},
		// Within the limits, so shown as it is: the model's client would decode the frame.
		{"webp frame beyond a small canvas", mimeWebP, webpFile(webpCanvas(0, 64, 64), vp8Frame(16383, 16383)), "not the 64×64 of its canvas"},
		{"webp alpha over a frame beyond its canvas", mimeWebP, webpFile(webpCanvas(0x10, 1600, 1), riffChunk("ALPH", []byte{0}), vp8Frame(16383, 16383)), "not the 1600×1 of its canvas"},
		{"webp animation frame beyond its canvas", mimeWebP, webpFile(webpCanvas(0x02, 64, 64), riffChunk("ANIM", make([]byte, 6)),
			animFrame(0, 0, 64, 64, vp8Frame(16383, 16383))), "frame 1 is 16383×16383 pixels, not the 64×64"},
		{"webp animation frame off its canvas", mimeWebP, webpFile(webpCanvas(0x02, 64, 64), riffChunk("ANIM", make([]byte, 6)),
			animFrame(0, 0, 64, 64, vp8Frame(64, 64)), animFrame(16, 0, 16000, 64, vp8Frame(16000, 64))), "frame 2 of 16000×64 at (16, 0) falls outside the 64×64 canvas"},
		{"webp canvas whose frame is missing", mimeWebP, webpFile(webpCanvas(0, 1600, 1)), "no frame"},
		{"webp chunk past the end", mimeWebP, webpFile(webpCanvas(0, 1600, 1), []byte("VP8 \xff\xff\xff\x00")), "runs past the end"},
		// Go's GIF decoder refuses a first frame beyond the screen, but decodes only that one: a later frame is the
		// model's client's to decode.
		{"gif frame beyond its screen", mimeGIF, gifFile(1600, 1, gifFrame(0, 0, 65535, 65535)), "frame 1 of 65535×65535 at (0, 0) falls outside the 1600×1 screen"},
		{"gif later frame beyond a small screen", mimeGIF, gifFile(10, 10, gifFrame(0, 0, 10, 10), gifFrame(5, 5, 65000, 65000)), "frame 2 of 65000×65000 at (5, 5)"},
		{"gif block past the end", mimeGIF, append(gifFile(1600, 1)[:19], 0x2c, 1), "ends inside"},
		// 5000×5000 RGBA needs 100 MB decoded; deflate expands at most 1032 times, so 32 bytes cannot hold it, and
		// the decoder would allocate all of it before finding out.
		{"png pixel data too short for its size", mimePNG, pngFile(5000, 5000, 8, 6, noise(32)), "cannot hold 5000×5000 pixels"},
		// 20 megapixels within the pixel bound, but at 16 bits a sample the decoder holds 8 bytes a pixel.
		{"png of 16-bit samples over the memory bound", mimePNG, pngFile(5000, 4000, 16, 6, noise(160_000_000/1000)), "of memory to decode"},
		{"png chunk past the end", mimePNG, pngFile(5000, 5000, 8, 6, nil)[:40], "runs past the end"},
		// A progressive JPEG keeps 64 coefficients of 4 bytes per 8×8 block of each component: 12 bytes a pixel at
		// full-size chroma, 300 MB for 5000×5000, allocated at its first scan.
		{"jpeg progressive over the memory bound", mimeJPEG, jpegFile(0xc2, 5000, 5000, []byte{0x11, 0x11, 0x11}), "of memory to decode"},
		// Each scan is a pass over every block of the image: a few bytes each, thousands of passes.
		{"jpeg of thousands of scans", mimeJPEG, jpegScanBomb(4000, 4000, 5000), "5001 scans"},
		{"jpeg with two frames", mimeJPEG, append(jpegHeaders(0xc0, 1600, 1, []byte{0x11}), jpegFile(0xc2, 16000, 16000, []byte{0x11})[2:]...), "more than one frame"},
	}
}

// TestImageBombsRefused feeds each crafted file to fitImage: each is refused, quickly and without allocating
// the image it hides.
func TestImageBombsRefused(t *testing.T) {
	lim := defaultImageLimits()
	slots := newScalingSlots(1, time.Second)
	for _, b := range imageBombs() {
		t.Run(b.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			out, info, err := fitImage(t.Context(), b.data, b.mime, lim, slots, "alice")
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("%d-byte file: got %d bytes %+v, error %v; want a refusal saying %q", len(b.data), len(out), info, err, b.want)
			}
			// Generous bounds, to catch a decode of the hidden image (tens of seconds, a gigabyte) under any load.
			if took > 2*time.Second {
				t.Errorf("refused after %v", took)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
				t.Errorf("refusing it allocated %d MiB", alloc>>20)
			}
			t.Logf("%d bytes refused in %v: %v", len(b.data), took, err)
		})
	}
}

// BenchmarkRefuseImageBomb measures what refusing the crafted files costs a call.
func BenchmarkRefuseImageBomb(b *testing.B) {
	lim := defaultImageLimits()
	slots := newScalingSlots(1, time.Second)
	for _, bomb := range imageBombs() {
		b.Run(strings.ReplaceAll(bomb.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := fitImage(b.Context(), bomb.data, bomb.mime, lim, slots, "alice"); err == nil {
					b.Fatal("not refused")
				}
			}
		})
	}
}

// TestImagesOfEveryFormatStillShown: the checks pass the files real encoders write, scaled or not.
func TestImagesOfEveryFormatStillShown(t *testing.T) {
	lim := imageLimits{maxBytes: 64 << 10, maxEdge: 200, maxPixels: 4_000_000, maxDecodeBytes: 64 << 20}
	slots := newScalingSlots(1, time.Second)
	for name, f := range map[string]struct {
		data []byte
		mime string
	}{
		"png":              {testPNG(t, 800, 400, false), mimePNG},
		"jpeg":             {testJPEG(t, 800, 400), mimeJPEG},
		"gif":              {testGIF(t, 800, 400), mimeGIF},
		"webp lossless":    {testWebP(t, "gopher.lossless.webp"), mimeWebP},
		"webp lossy alpha": {testWebP(t, "rose.lossy-alpha.webp"), mimeWebP},
	} {
		out, info, err := fitImage(t.Context(), f.data, f.mime, lim, slots, "alice")
		if err != nil || len(out) == 0 || max(info.Width, info.Height) > lim.maxEdge {
			t.Errorf("%s: %+v %v", name, info, err)
		}
	}
}

// TestImageSlotsFairPerOwner: an owner whose image is being decoded holds its own slot, not the others': another
// owner's image is scaled meanwhile, and the first owner's next image waits its turn, then is refused as busy.
func TestImageSlotsFairPerOwner(t *testing.T) {
	slots := newScalingSlots(2, 200*time.Millisecond)
	release, err := slots.acquire(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	lim := imageLimits{maxBytes: 64 << 10, maxEdge: 200, maxPixels: 4_000_000, maxDecodeBytes: 64 << 20}
	chart := testPNG(t, 2000, 2000, false)
	if _, info, err := fitImage(t.Context(), chart, mimePNG, lim, slots, "bob"); err != nil || !info.Scaled {
		t.Fatalf("bob's chart while alice's image is decoded: %+v %v", info, err)
	}
	_, _, err = fitImage(t.Context(), chart, mimePNG, lim, slots, "alice")
	if !errors.Is(err, errScalingBusy) {
		t.Fatalf("alice's second image while her first is decoded: %v, want busy", err)
	}
	release()
	if _, info, err := fitImage(t.Context(), chart, mimePNG, lim, slots, "alice"); err != nil || !info.Scaled {
		t.Fatalf("alice's image after hers is done: %+v %v", info, err)
	}
}
