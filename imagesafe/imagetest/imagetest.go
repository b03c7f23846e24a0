// Package imagetest builds image files for tests: charts as real encoders write them, and crafted files whose
// headers understate what decoding them costs, built byte by byte so that each one's trick is spelled out beside
// it.
package imagetest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// Chart draws a w×h chart-like picture: a white canvas with coloured bars and some noise, so that it does not
// compress to nothing.
func Chart(t testing.TB, w, h int, noise bool) []byte {
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

// ChartJPEG is Chart's picture as a JPEG, ChartGIF as a GIF.
func ChartJPEG(t testing.TB, w, h int) []byte {
	return chartAs(t, w, h, func(out io.Writer, img image.Image) error { return jpeg.Encode(out, img, nil) })
}

func ChartGIF(t testing.TB, w, h int) []byte {
	return chartAs(t, w, h, func(out io.Writer, img image.Image) error { return gif.Encode(out, img, nil) })
}

// chartAs is Chart's picture as encode writes it.
func chartAs(t testing.TB, w, h int, encode func(io.Writer, image.Image) error) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(Chart(t, w, h, false)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// PNGHeaderOnly is the start of a PNG that claims w×h pixels: enough for DecodeConfig, nothing to decode.
func PNGHeaderOnly(w, h uint32) []byte {
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

// The crafted files below each claim a small or ordinary image in the header that image.DecodeConfig reads, and
// hide a far larger (or far costlier) one from it: a frame larger than its canvas, a progressive JPEG whose
// coefficients outweigh its pixels, a PNG whose pixel data cannot hold what it claims. They are built here, byte
// by byte, so that each one's trick is spelled out beside it.

func le16(v int) []byte { return []byte{byte(v), byte(v >> 8)} }
func le24(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }

// WebPFile wraps chunks in the RIFF container of a WebP file.
func WebPFile(chunks ...[]byte) []byte {
	body := []byte("WEBP")
	for _, c := range chunks {
		body = append(body, c...)
	}
	return append(append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...), body...)
}

// RIFFChunk is one RIFF chunk: its FourCC, length, body and the pad byte of an odd length.
func RIFFChunk(id string, body []byte) []byte {
	out := append([]byte(id), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	out = append(out, body...)
	if len(body)%2 == 1 {
		out = append(out, 0)
	}
	return out
}

// WebPCanvas is a VP8X chunk declaring a w×h canvas with the given feature flags (0x10 alpha, 0x02 animation).
func WebPCanvas(flags byte, w, h int) []byte {
	return RIFFChunk("VP8X", append(append([]byte{flags, 0, 0, 0}, le24(w-1)...), le24(h-1)...))
}

// VP8Frame is a lossy key frame of w×h pixels with almost no data: a first partition of 8 zero bytes. The decoder
// reads a short partition as zeros and decodes every macroblock anyway, allocating the frame at its own size.
func VP8Frame(w, h int) []byte {
	const firstPartition = 8
	tag := []byte{0x10 | firstPartition&7<<5, firstPartition >> 3, 0} // key frame, shown
	hdr := append(append(tag, 0x9d, 0x01, 0x2a), append(le16(w), le16(h)...)...)
	return RIFFChunk("VP8 ", append(hdr, make([]byte, firstPartition)...))
}

// VP8LFrame is a lossless frame's header for w×h pixels.
func VP8LFrame(w, h int) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	return RIFFChunk("VP8L", []byte{0x2f, byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)})
}

// AnimFrame is an ANMF chunk placing frame (a VP8 or VP8L chunk) of w×h at (x, y) of the canvas.
func AnimFrame(x, y, w, h int, frame []byte) []byte {
	hdr := append(append(append(append(le24(x/2), le24(y/2)...), le24(w-1)...), le24(h-1)...), 0, 0, 0, 0)
	return RIFFChunk("ANMF", append(hdr, frame...))
}

// GIFFile is a GIF of a w×h logical screen with a two-colour palette and the given frames.
func GIFFile(w, h int, frames ...[]byte) []byte {
	out := append(append(append([]byte("GIF89a"), le16(w)...), le16(h)...), 0x80, 0, 0, 0, 0, 0, 255, 255, 255)
	for _, f := range frames {
		out = append(out, f...)
	}
	return append(out, 0x3b)
}

// GIFFrame is an image descriptor of w×h at (x, y) followed by LZW data of a clear code, one pixel of colour 0
// and an end code: a 1×1 frame whole, a larger one's first pixel.
func GIFFrame(x, y, w, h int) []byte {
	out := append(append(append(append([]byte{0x2c}, le16(x)...), le16(y)...), le16(w)...), le16(h)...)
	return append(out, 0, 2, 2, 0x44, 0x01, 0)
}

// PNGFile is a PNG of w×h pixels (bit depth and colour type as in IHDR) with idat as its compressed pixel data.
func PNGFile(w, h int, depth, colorType byte, idat []byte) []byte {
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

// JPEGSegment is a JPEG marker segment: 0xFF, the marker, a 2-byte length and body.
func JPEGSegment(marker byte, body []byte) []byte {
	return append([]byte{0xff, marker, byte((len(body) + 2) >> 8), byte(len(body) + 2)}, body...)
}

// JPEGHeaders are a JPEG's SOI, a JFIF segment (after which image.DecodeConfig stops at the first frame), a
// quantisation table and the frame (marker sof: 0xc0 baseline, 0xc2 progressive)
// of w×h pixels in components of the given sampling factors (0x11 full size, 0x22 luma over quarter-size
// chroma), and Huffman tables of one code each: DC difference 0, and AC run of 2^14 or more empty blocks.
func JPEGHeaders(sof byte, w, h int, sampling []byte) []byte {
	frame := []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(len(sampling))}
	for i, s := range sampling {
		frame = append(frame, byte(i+1), s, 0)
	}
	oneCode := func(class, symbol byte) []byte {
		return append(append([]byte{class << 4, 1}, make([]byte, 15)...), symbol)
	}
	out := append([]byte{0xff, 0xd8}, JPEGSegment(0xe0, []byte("JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"))...)
	out = append(out, JPEGSegment(0xdb, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...))...)
	out = append(out, JPEGSegment(sof, frame)...)
	return append(append(out, JPEGSegment(0xc4, oneCode(0, 0x00))...), JPEGSegment(0xc4, oneCode(1, 0xe0))...)
}

// JPEGFile is JPEGHeaders followed by one DC scan over every component (for a progressive file, where the
// decoder allocates its coefficients) with a few bytes of data, and EOI.
func JPEGFile(sof byte, w, h int, sampling []byte) []byte {
	scan := []byte{byte(len(sampling))}
	for i := range sampling {
		scan = append(scan, byte(i+1), 0)
	}
	out := append(JPEGHeaders(sof, w, h, sampling), JPEGSegment(0xda, append(scan, 0, 0, 0))...)
	return append(out, 0x00, 0x00, 0xff, 0xd9)
}

// JPEGScanBomb is a progressive greyscale JPEG of w×h pixels that is valid to the end: a DC scan of every block
// (one bit each), then scans AC scans, each a pass over every block in a few bytes (runs of 32768 empty
// blocks, 15 bits apiece).
func JPEGScanBomb(w, h, scans int) []byte {
	blocks := ((w + 7) / 8) * ((h + 7) / 8)
	out := JPEGHeaders(0xc2, w, h, []byte{0x11})
	out = append(out, JPEGSegment(0xda, []byte{1, 1, 0x00, 0, 0, 0})...)
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
		out = append(append(out, JPEGSegment(0xda, []byte{1, 1, 0x00, 1, 63, 0})...), runs...)
	}
	return append(out, 0xff, 0xd9)
}

// Noise is n bytes that do not compress: pixel data long enough to pass for an image's.
func Noise(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}

// bitWriter writes a lossless WebP bitstream: bits from the least significant of each byte on.
type bitWriter struct {
	out []byte
	n   uint
}

func (b *bitWriter) write(v uint32, n uint) {
	for i := range n {
		if b.n%8 == 0 {
			b.out = append(b.out, 0)
		}
		b.out[len(b.out)-1] |= byte(v>>i&1) << (b.n % 8)
		b.n++
	}
}

// oneSymbol writes a Huffman code of the single symbol s, which takes no bits to read: a simple code (1), of one
// symbol (0), written in 1 or 8 bits.
func (b *bitWriter) oneSymbol(s uint32) {
	b.write(1, 1)
	b.write(0, 1)
	if s < 2 {
		b.write(0, 1)
		b.write(s, 1)
		return
	}
	b.write(1, 1)
	b.write(s, 8)
}

// VP8LGroups is a lossless WebP of w×h pixels, valid to its last pixel, whose entropy image maps every tile of 4×4
// pixels to group largest, and which then holds largest+1 groups of five one-symbol codes (20 bits a group). The
// decoder allocates every group, 2,680 bytes each, before the first pixel: 65536 groups cost 170 MiB in a file of
// 164 KB.
func VP8LGroups(w, h, largest int) []byte {
	var b bitWriter
	b.write(0, 1)                       // no transform
	b.write(0, 1)                       // no colour cache
	b.write(1, 1)                       // an entropy image,
	b.write(0, 3)                       // of one pixel per 4×4 tile, itself of one group of codes:
	b.write(0, 1)                       // no colour cache
	b.oneSymbol(uint32(largest & 0xff)) // green: the low byte of the group index
	b.oneSymbol(uint32(largest >> 8))   // red: its high byte
	for range 3 {
		b.oneSymbol(0) // blue, alpha, distance
	}
	// Every pixel of the entropy image is read in no bits: the codes have one symbol each. Then the groups:
	for range (largest + 1) * 5 {
		b.oneSymbol(0)
	}
	// And the frame's pixels, in no bits again.
	bits := uint32(w-1) | uint32(h-1)<<14
	hdr := []byte{0x2f, byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)}
	return WebPFile(RIFFChunk("VP8L", append(hdr, b.out...)))
}
