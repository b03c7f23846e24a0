package imagesafe

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/gif" // registered with image.Decode, as are the others
	"image/jpeg"
	"image/png"
	"runtime/debug"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"
)

// Limits are what an image shown to the model may cost.
type Limits struct {
	// MaxBytes bounds the bytes sent (before base64); MaxEdge the longest side in pixels.
	MaxBytes, MaxEdge int
	// MaxPixels bounds the images decoded for scaling: a small file can claim a huge canvas (a decompression
	// bomb), and decoding costs time with every pixel. A JPEG's scans are passes over the image, each costing
	// about a decode: the bound holds for the pixels of all of them together, times maxPasses.
	MaxPixels int
	// MaxDecodeBytes bounds the memory one decode takes, which depends on the format as much as on the pixels
	// (a 16-bit PNG takes 8 bytes a pixel, a progressive JPEG up to 17).
	MaxDecodeBytes int64
}

// DefaultMaxPixels and DefaultMaxDecodeBytes bound the images decoded for scaling (see Limits): 100 MB of memory
// at 4 bytes a pixel, and 128 MiB whatever the format.
const (
	DefaultMaxPixels      = 25_000_000
	DefaultMaxDecodeBytes = 128 << 20
)

// maxPasses is how many decodes' worth of work a JPEG's scans may take: common progressive encoders write 10.
const maxPasses = 16

// Info describes the image an answer carries.
type Info struct {
	MIMEType     string `json:"mime_type" jsonschema_description:"The MIME type of the image content."`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	Bytes        int    `json:"bytes" jsonschema_description:"Size of the image content in bytes (before base64)."`
	Scaled       bool   `json:"scaled" jsonschema_description:"True when the image was scaled down (or re-encoded) to fit the limits; the file itself is unchanged."`
	SourceWidth  int    `json:"source_width,omitempty"`
	SourceHeight int    `json:"source_height,omitempty"`
}

// TooLargeError is an image that cannot be brought within the limits; Reason is the answer to the model.
type TooLargeError struct{ Reason string }

func (e *TooLargeError) Error() string { return e.Reason }

// Fit returns data as the model should see it: the file itself when it is within the limits, else a copy
// scaled down to fit them (PNG for lossless sources when it fits, else JPEG). An image that is not valid, or whose
// structure hides more than its header shows (see readHeader), is refused with an error before anything is
// decoded; one that would cost too much to scale with a *TooLargeError. The decode waits for owner's turn
// in slots, and fails with ErrBusy or ctx's error when it does not come.
func Fit(ctx context.Context, data []byte, mime string, lim Limits, slots *Slots, owner string) ([]byte, Info, error) {
	notValid := func(err error) error {
		return fmt.Errorf("the file starts like a %s image but is not a valid one: %w", FormatName(mime), err)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, Info{}, notValid(err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > lim.MaxPixels/max(cfg.Height, 1) {
		return nil, Info{}, &TooLargeError{Reason: fmt.Sprintf("the image is %d×%d pixels, more than the %d megapixels "+
			"e2b_read_file scales down", cfg.Width, cfg.Height, lim.MaxPixels/1_000_000)}
	}
	hdr, err := readHeader(data, mime)
	if err != nil {
		return nil, Info{}, notValid(err)
	}
	if hdr.width != cfg.Width || hdr.height != cfg.Height {
		return nil, Info{}, notValid(fmt.Errorf("its structure declares %d×%d pixels where its header says %d×%d",
			hdr.width, hdr.height, cfg.Width, cfg.Height))
	}
	info := Info{MIMEType: mime, Width: cfg.Width, Height: cfg.Height, Bytes: len(data)}
	if len(data) <= lim.MaxBytes && max(cfg.Width, cfg.Height) <= lim.MaxEdge {
		return data, info, nil
	}
	switch pixels := int64(cfg.Width) * int64(cfg.Height); {
	case hdr.decodeBytes > lim.MaxDecodeBytes:
		return nil, Info{}, &TooLargeError{Reason: fmt.Sprintf("the %d×%d image takes %d MiB of memory to decode, more than "+
			"the %d MiB e2b_read_file gives one image", cfg.Width, cfg.Height, hdr.decodeBytes>>20, lim.MaxDecodeBytes>>20)}
	case int64(hdr.passes)*pixels > maxPasses*int64(lim.MaxPixels):
		return nil, Info{}, &TooLargeError{Reason: fmt.Sprintf("the %d×%d image is written in %d scans, each a pass over "+
			"all of it: more work than e2b_read_file gives one image", cfg.Width, cfg.Height, hdr.passes)}
	}
	release, err := slots.Acquire(ctx, owner)
	if err != nil {
		return nil, Info{}, err
	}
	defer release()
	out, info, err := decodeAndScale(data, info, lim)
	if hdr.decodeBytes >= giveBackBytes {
		// The decoded image is garbage now, but the collector would keep its memory until the heap doubles
		// again: two big decodes in turn would cost the memory of both, and more. Give it back before the
		// slot goes to the next decode.
		debug.FreeOSMemory()
	}
	return out, info, err
}

// giveBackBytes is the decode cost from which the memory of a decode is given back at once (see Fit): a full
// collection, a few milliseconds, beside a decode of a second or so.
const giveBackBytes = 16 << 20

// decodeAndScale decodes data (the first frame of an animated GIF) and scales it down to fit lim, in the format
// that fits: PNG for a lossless source when it fits, else JPEG.
func decodeAndScale(data []byte, info Info, lim Limits) ([]byte, Info, error) {
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, Info{}, fmt.Errorf("the %s image could not be decoded: %w", FormatName(info.MIMEType), err)
	}
	info.SourceWidth, info.SourceHeight, info.Scaled = info.Width, info.Height, true
	w, h := fitEdge(info.Width, info.Height, lim.MaxEdge)
	lossless := info.MIMEType == PNG || info.MIMEType == GIF
	for {
		dst := scaleTo(src, w, h)
		var out []byte
		outMIME := JPEG
		if lossless {
			if out, err = encodePNG(dst); err == nil && len(out) <= lim.MaxBytes {
				outMIME = PNG
			}
		}
		if outMIME == JPEG {
			if out, err = encodeJPEG(dst); err != nil {
				return nil, Info{}, err
			}
		}
		if len(out) <= lim.MaxBytes {
			info.MIMEType, info.Width, info.Height, info.Bytes = outMIME, w, h, len(out)
			return out, info, nil
		}
		if w <= 64 && h <= 64 {
			return nil, Info{}, &TooLargeError{Reason: fmt.Sprintf("even scaled down to %d×%d it takes more than %d bytes",
				w, h, lim.MaxBytes)}
		}
		// Three quarters of the edge is a bit more than half the bytes: a few rounds reach any limit.
		w, h = max(w*3/4, 1), max(h*3/4, 1)
	}
}

// scaleTo scales src down to w×h. It halves the image while it is at least twice the target (bilinear sampling
// at exactly half the size averages each 2×2 block, a box filter), then samples the rest of the way: the quality
// of a proper downscale without the kernel scalers' working buffer of 32 bytes per target-width × source-height
// pixel, which for a large photo runs to hundreds of megabytes.
func scaleTo(src image.Image, w, h int) *image.RGBA {
	for b := src.Bounds(); b.Dx() >= 2*w && b.Dy() >= 2*h; b = src.Bounds() {
		half := image.NewRGBA(image.Rect(0, 0, b.Dx()/2, b.Dy()/2))
		draw.ApproxBiLinear.Scale(half, half.Bounds(), src, b, draw.Src, nil)
		src = half
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	return dst
}

// fitEdge scales w×h down so that its longer side is at most edge, keeping the aspect ratio.
func fitEdge(w, h, edge int) (int, int) {
	if w <= edge && h <= edge {
		return w, h
	}
	if w >= h {
		return edge, max(h*edge/w, 1)
	}
	return max(w*edge/h, 1), edge
}

func encodePNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	err := enc.Encode(&buf, img)
	return buf.Bytes(), err
}

// encodeJPEG encodes img over a white background: JPEG has no transparency, and transparent pixels would come
// out black, hiding a chart's black lines and text.
func encodeJPEG(img image.Image) ([]byte, error) {
	flat := image.NewRGBA(img.Bounds())
	draw.Draw(flat, flat.Bounds(), image.White, image.Point{}, draw.Src)
	draw.Draw(flat, flat.Bounds(), img, img.Bounds().Min, draw.Over)
	var buf bytes.Buffer
	err := jpeg.Encode(&buf, flat, &jpeg.Options{Quality: 85})
	return buf.Bytes(), err
}
