package imagetest

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"

	"golang.org/x/image/webp"
)

// The builders are checked against the standard decoders (and x/image's WebP one), which know nothing of how they
// were written: each file is what it says it is, to the byte a decoder reads.

func TestChartsDecodeAtTheirSize(t *testing.T) {
	for name, decode := range map[string]func() (image.Image, error){
		"png":       func() (image.Image, error) { return png.Decode(bytes.NewReader(Chart(t, 97, 41, false))) },
		"png noise": func() (image.Image, error) { return png.Decode(bytes.NewReader(Chart(t, 97, 41, true))) },
		"jpeg":      func() (image.Image, error) { return jpeg.Decode(bytes.NewReader(ChartJPEG(t, 97, 41))) },
		"gif":       func() (image.Image, error) { return gif.Decode(bytes.NewReader(ChartGIF(t, 97, 41))) },
	} {
		img, err := decode()
		if err != nil || img.Bounds() != image.Rect(0, 0, 97, 41) {
			t.Errorf("%s chart of 97×41: %v, %v", name, img.Bounds(), err)
		}
	}
	// The picture is a chart, not a blank: white above the bars, a bar's blue at the bottom.
	img, _ := png.Decode(bytes.NewReader(Chart(t, 100, 60, false)))
	if top, bottom := color.NRGBAModel.Convert(img.At(50, 0)), color.NRGBAModel.Convert(img.At(50, 59)); top != (color.NRGBA{255, 255, 255, 255}) ||
		bottom == top {
		t.Errorf("the chart is %v at the top and %v at the bottom", top, bottom)
	}
	if plain, noisy := len(Chart(t, 200, 200, false)), len(Chart(t, 200, 200, true)); noisy < 4*plain {
		t.Errorf("noise does not make the chart costlier to compress: %d bytes, %d without", noisy, plain)
	}
}

func TestPNGHeaderOnlyClaimsItsSizeAndHoldsNoPixels(t *testing.T) {
	file := PNGHeaderOnly(70000, 3)
	cfg, err := png.DecodeConfig(bytes.NewReader(file))
	if err != nil || cfg.Width != 70000 || cfg.Height != 3 || cfg.ColorModel != color.NRGBAModel {
		t.Fatalf("DecodeConfig: %+v, %v; want 70000×3 RGBA", cfg, err)
	}
	if _, err := png.Decode(bytes.NewReader(file)); err == nil {
		t.Error("a header alone decodes")
	}
}

func TestPNGFile(t *testing.T) {
	// 3×2 pixels of 8-bit grey, each row a filter byte and its pixels.
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write([]byte{0, 10, 20, 30, 0, 40, 50, 60})
	_ = zw.Close()
	img, err := png.Decode(bytes.NewReader(PNGFile(3, 2, 8, 0, z.Bytes())))
	if err != nil {
		t.Fatalf("a PNG of whole pixel data: %v", err)
	}
	if g, ok := img.(*image.Gray); !ok || img.Bounds() != image.Rect(0, 0, 3, 2) || g.GrayAt(2, 1).Y != 60 {
		t.Errorf("decoded as %T of %v", img, img.Bounds())
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(PNGFile(5000, 4000, 16, 6, Noise(32))))
	if err != nil || cfg.Width != 5000 || cfg.Height != 4000 || cfg.ColorModel != color.NRGBA64Model {
		t.Errorf("a 16-bit RGBA header of 5000×4000: %+v, %v", cfg, err)
	}
}

func TestNoiseIsFixedAndDoesNotCompress(t *testing.T) {
	a, b := Noise(1<<16), Noise(1<<16)
	if len(a) != 1<<16 || !bytes.Equal(a, b) {
		t.Fatalf("Noise is %d bytes, the same each time: %v", len(a), bytes.Equal(a, b))
	}
	var z bytes.Buffer
	fw, _ := flate.NewWriter(&z, flate.BestCompression)
	_, _ = fw.Write(a)
	_ = fw.Close()
	if z.Len() < len(a) {
		t.Errorf("%d bytes of noise compress to %d", len(a), z.Len())
	}
}

// A GIF's frame holds one pixel, so the decoder reads the screen, a 1×1 frame whole, and the frames' layout is
// spelled out against GIF89a's image descriptor: 0x2C, then X, Y, width, height in 16-bit little-endian fields.
func TestGIFFileAndFrames(t *testing.T) {
	f1, f2 := GIFFrame(0, 0, 10, 8), GIFFrame(2, 3, 300, 65535)
	file := GIFFile(10, 8, f1, f2)
	cfg, err := gif.DecodeConfig(bytes.NewReader(file))
	if err != nil || cfg.Width != 10 || cfg.Height != 8 {
		t.Fatalf("DecodeConfig: %+v, %v; want a 10×8 screen", cfg, err)
	}
	want := []byte{0x2c, 2, 0, 3, 0, 0x2c, 1, 0xff, 0xff, 0, 2, 2, 0x44, 0x01, 0}
	if !bytes.Equal(f2, want) {
		t.Errorf("GIFFrame(2, 3, 300, 65535):\n got % x\nwant % x", f2, want)
	}
	// The screen's header and palette (6 + 7 + 6 bytes), the frames in order, the trailer.
	if !bytes.Equal(file[19:], append(append(append([]byte{}, f1...), f2...), 0x3b)) {
		t.Errorf("GIFFile does not hold its frames in order after the palette: % x", file)
	}
	g, err := gif.DecodeAll(bytes.NewReader(GIFFile(1, 1, GIFFrame(0, 0, 1, 1))))
	if err != nil || len(g.Image) != 1 || g.Image[0].Bounds() != image.Rect(0, 0, 1, 1) || g.Image[0].Pix[0] != 0 {
		t.Errorf("a 1×1 GIF of one frame: %v", err)
	}
}

func TestWebPFrames(t *testing.T) {
	for name, tc := range map[string]struct {
		file []byte
		w, h int
	}{
		"lossy":            {WebPFile(VP8Frame(35, 19)), 35, 19},
		"lossy on canvas":  {WebPFile(WebPCanvas(0, 35, 19), VP8Frame(35, 19)), 35, 19},
		"lossless header":  {WebPFile(VP8LFrame(300, 17)), 300, 17},
		"lossless groups":  {VP8LGroups(40, 12, 3), 40, 12},
		"canvas of a size": {WebPFile(WebPCanvas(0x10, 1600, 3), RIFFChunk("ALPH", []byte{0}), VP8Frame(1600, 3)), 1600, 3},
	} {
		cfg, err := webp.DecodeConfig(bytes.NewReader(tc.file))
		if err != nil || cfg.Width != tc.w || cfg.Height != tc.h {
			t.Errorf("%s: DecodeConfig %+v, %v; want %d×%d", name, cfg, err, tc.w, tc.h)
		}
	}
	// The lossless file of many groups is valid to its last pixel.
	if img, err := webp.Decode(bytes.NewReader(VP8LGroups(40, 12, 3))); err != nil || img.Bounds() != image.Rect(0, 0, 40, 12) {
		t.Errorf("VP8LGroups(40, 12, 3) decodes to %v, %v", boundsOf(img), err)
	}
}

func boundsOf(img image.Image) image.Rectangle {
	if img == nil {
		return image.Rectangle{}
	}
	return img.Bounds()
}

// The RIFF container and the animation frame, which x/image does not read, spelled out against the WebP
// container's layout: a length that counts what follows, a pad byte after an odd body, and an ANMF header of
// X/2, Y/2, width-1, height-1 in 24-bit little-endian fields.
func TestRIFFLayout(t *testing.T) {
	c := RIFFChunk("ALPH", []byte{7, 8, 9})
	if !bytes.Equal(c, []byte{'A', 'L', 'P', 'H', 3, 0, 0, 0, 7, 8, 9, 0}) {
		t.Errorf("RIFFChunk of 3 bytes: % x", c)
	}
	file := WebPFile(c)
	if string(file[:4]) != "RIFF" || string(file[8:12]) != "WEBP" || binary.LittleEndian.Uint32(file[4:]) != uint32(len(file)-8) {
		t.Errorf("WebPFile: % x", file)
	}
	frame := VP8Frame(64, 64)
	a := AnimFrame(20, 40, 300, 70000, frame)
	want := append([]byte{'A', 'N', 'M', 'F'}, binary.LittleEndian.AppendUint32(nil, uint32(16+len(frame)))...)
	want = append(want, 10, 0, 0, 20, 0, 0, 43, 1, 0, 0x6f, 0x11, 0x01, 0, 0, 0, 0)
	if !bytes.Equal(a[:len(want)], want) || !bytes.Equal(a[len(want):], frame) {
		t.Errorf("AnimFrame(20, 40, 300, 70000):\n got % x\nwant % x + the frame", a[:min(len(a), len(want))], want)
	}
	canvas := WebPCanvas(0x12, 300, 70000)
	if !bytes.Equal(canvas[8:], []byte{0x12, 0, 0, 0, 43, 1, 0, 0x6f, 0x11, 0x01}) {
		t.Errorf("WebPCanvas(0x12, 300, 70000): % x", canvas[8:])
	}
}

func TestJPEGs(t *testing.T) {
	for name, tc := range map[string]struct {
		file  []byte
		model color.Model
	}{
		"baseline grey":     {JPEGFile(0xc0, 100, 60, []byte{0x11}), color.GrayModel},
		"progressive grey":  {JPEGFile(0xc2, 100, 60, []byte{0x11}), color.GrayModel},
		"progressive 4:2:0": {JPEGFile(0xc2, 100, 60, []byte{0x22, 0x11, 0x11}), color.YCbCrModel},
		"headers alone":     {JPEGHeaders(0xc0, 100, 60, []byte{0x11}), color.GrayModel},
	} {
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(tc.file))
		if err != nil || cfg.Width != 100 || cfg.Height != 60 || cfg.ColorModel != tc.model {
			t.Errorf("%s: DecodeConfig %+v, %v; want 100×60", name, cfg, err)
		}
	}
	// The scan bomb is valid to its end: every scan decodes.
	img, err := jpeg.Decode(bytes.NewReader(JPEGScanBomb(64, 48, 3)))
	if err != nil || img.Bounds() != image.Rect(0, 0, 64, 48) {
		t.Errorf("JPEGScanBomb(64, 48, 3) decodes to %v, %v", boundsOf(img), err)
	}
	if s := JPEGSegment(0xfe, []byte("hi")); !bytes.Equal(s, []byte{0xff, 0xfe, 0, 4, 'h', 'i'}) {
		t.Errorf("JPEGSegment: % x", s)
	}
}
