package imagesafe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// header is what decoding an image will cost, read from the file's structure before anything is decoded.
//
// image.DecodeConfig reads one header and the decoders trust another: a WebP's VP8X chunk declares the canvas,
// but golang.org/x/image/webp decodes the frame at the size of the frame's own header, never comparing the two;
// a GIF's later frames, a progressive JPEG's coefficients and scans and a PNG's bit depth are not in what
// DecodeConfig reports at all. readHeader walks each format the way its decoder does, so that a file is
// decoded only when every frame of it fits its canvas and its cost is known; a decode cannot be cancelled.
type header struct {
	// width and height are the image's canvas: every frame in the file lies within it.
	width, height int
	// decodeBytes is an upper bound on the memory the decoder allocates for the image.
	decodeBytes int64
	// passes is how many times the decoder goes over the whole image: a JPEG's scans, 1 for the others.
	passes int
}

// readHeader reads the header of data, a file that MIME named mime. Its errors say what in the file's
// structure is wrong or deceptive; a file they let through decodes within the header's cost or fails early.
func readHeader(data []byte, mime string) (header, error) {
	switch mime {
	case PNG:
		return readPNGHeader(data)
	case JPEG:
		return readJPEGHeader(data)
	case GIF:
		return readGIFHeader(data)
	case WebP:
		return readWebPHeader(data)
	}
	return header{}, fmt.Errorf("%s is not an image format e2b_read_file shows", mime)
}

// errPastEnd is a structure whose declared length goes beyond the file.
var errPastEnd = errors.New("a chunk runs past the end of the file")

// PNG: the signature, then chunks of a 4-byte big-endian length, a 4-byte type, the data and a CRC; IHDR first,
// IEND last. Go's decoder allocates the whole image as IHDR declares it, then inflates IDAT into it, and stops
// reading at IEND.
func readPNGHeader(data []byte) (header, error) {
	var (
		h                 = header{passes: 1}
		depth, colorType  byte
		interlaced        bool
		compressed        int64 // bytes of IDAT
		seenIHDR, seenRNS bool
	)
	for p := data[8:]; ; {
		if len(p) < 12 {
			return h, errPastEnd
		}
		n, typ := binary.BigEndian.Uint32(p), string(p[4:8])
		if n > 1<<31-1 || int64(n) > int64(len(p)-12) {
			return h, errPastEnd
		}
		body := p[8 : 8+n]
		if !seenIHDR && typ != "IHDR" {
			return h, errors.New("it does not start with an IHDR chunk")
		}
		switch typ {
		case "IHDR":
			if seenIHDR || n != 13 {
				return h, errors.New("its IHDR chunk is malformed or repeated")
			}
			seenIHDR = true
			w, ht := binary.BigEndian.Uint32(body), binary.BigEndian.Uint32(body[4:])
			if w == 0 || ht == 0 || w > 1<<31-1 || ht > 1<<31-1 {
				return h, fmt.Errorf("its IHDR declares %d×%d pixels", w, ht)
			}
			h.width, h.height = int(w), int(ht)
			depth, colorType, interlaced = body[8], body[9], body[12] == 1
		case "tRNS":
			seenRNS = true
		case "IDAT":
			compressed += int64(n)
		case "IEND":
			channels, ok := pngChannels(colorType, depth)
			if !ok {
				return h, fmt.Errorf("its IHDR declares colour type %d at bit depth %d, which PNG does not have", colorType, depth)
			}
			pixels := int64(h.width) * int64(h.height)
			// Go decodes into 4 bytes a pixel (8 at 16 bits a sample), 1 for a palette or a grey without
			// transparency; an interlaced image's passes are held beside it, half its size at most.
			perPixel := int64(4)
			switch {
			case depth == 16:
				perPixel = 8
			case colorType == 3, colorType == 0 && !seenRNS:
				perPixel = 1
			}
			h.decodeBytes = pixels * perPixel
			if interlaced {
				h.decodeBytes += h.decodeBytes / 2
			}
			// Deflate expands its input at most 1032 times: fewer compressed bytes than that cannot hold the
			// image, and the decoder would find out only after allocating it.
			rowBytes := (int64(h.width)*int64(channels)*int64(depth) + 7) / 8
			if raw := rowBytes * int64(h.height); compressed*1032 < raw {
				return h, fmt.Errorf("its %d bytes of compressed pixel data cannot hold %d×%d pixels",
					compressed, h.width, h.height)
			}
			return h, nil
		}
		p = p[12+n:]
	}
}

// pngChannels is the number of samples a pixel of colorType has, and whether depth is one PNG allows for it.
func pngChannels(colorType, depth byte) (int, bool) {
	valid := func(depths ...byte) bool { return bytes.IndexByte(depths, depth) >= 0 }
	switch colorType {
	case 0:
		return 1, valid(1, 2, 4, 8, 16)
	case 2:
		return 3, valid(8, 16)
	case 3:
		return 1, valid(1, 2, 4, 8)
	case 4:
		return 2, valid(8, 16)
	case 6:
		return 4, valid(8, 16)
	}
	return 0, false
}

// JPEG: markers (0xFF and a code), most followed by a 2-byte big-endian length and their data; entropy-coded
// data follows each SOS (start of scan). Go's decoder skips any bytes between markers, takes one SOF (start of
// frame: 0xC0 baseline, 0xC1 extended, 0xC2 progressive) and refuses a second, and stops at EOI. This walk
// mirrors that loop, so it sees each SOF and SOS the decoder will.
const (
	jpegSOF0, jpegSOF1, jpegSOF2 = 0xc0, 0xc1, 0xc2
	jpegSOS, jpegEOI, jpegAPP14  = 0xda, 0xd9, 0xee
	jpegRST0, jpegRST7           = 0xd0, 0xd7
)

func readJPEGHeader(data []byte) (header, error) {
	var (
		h           header
		progressive bool
		sampling    []byte // each component's horizontal<<4 | vertical sampling factor
		ids         []byte // each component's id
		adobeRGB    bool   // an Adobe APP14 segment says the three components are R, G and B
	)
	p := 2 // after SOI
	for {
		// Skip to the next 0xFF, past the entropy-coded data of a scan and any junk the decoder tolerates.
		i := bytes.IndexByte(data[p:], 0xff)
		if i < 0 {
			return h, errors.New("it ends before its EOI marker")
		}
		p += i + 1
		for p < len(data) && data[p] == 0xff {
			p++
		}
		if p >= len(data) {
			return h, errors.New("it ends before its EOI marker")
		}
		marker := data[p]
		p++
		switch {
		case marker == 0, jpegRST0 <= marker && marker <= jpegRST7:
			continue // a stuffed 0xFF of entropy-coded data, or a restart marker: no length follows
		case marker == jpegEOI:
			if len(sampling) == 0 {
				return h, errors.New("it has no frame")
			}
			h.decodeBytes = jpegDecodeBytes(h.width, h.height, sampling, progressive, adobeRGB || string(ids) == "RGB")
			return h, nil
		}
		if len(data)-p < 2 {
			return h, errPastEnd
		}
		n := int(binary.BigEndian.Uint16(data[p:]))
		if n < 2 || n > len(data)-p {
			return h, errPastEnd
		}
		seg := data[p+2 : p+n]
		p += n
		switch marker {
		case jpegSOF0, jpegSOF1, jpegSOF2:
			if len(sampling) != 0 {
				return h, errors.New("it has more than one frame")
			}
			if len(seg) < 6 || len(seg) < 6+3*int(seg[5]) || seg[5] == 0 {
				return h, errors.New("its frame header is malformed")
			}
			h.height, h.width = int(binary.BigEndian.Uint16(seg[1:])), int(binary.BigEndian.Uint16(seg[3:]))
			if h.width == 0 || h.height == 0 {
				return h, fmt.Errorf("its frame declares %d×%d pixels", h.width, h.height)
			}
			progressive = marker == jpegSOF2
			for c := range int(seg[5]) {
				ids, sampling = append(ids, seg[6+3*c]), append(sampling, seg[7+3*c])
				if s := seg[7+3*c]; s>>4 == 0 || s>>4 > 4 || s&15 == 0 || s&15 > 4 {
					return h, errors.New("its frame header is malformed")
				}
			}
		case jpegSOS:
			if len(sampling) == 0 {
				return h, errors.New("a scan comes before its frame")
			}
			h.passes++
		case jpegAPP14:
			adobeRGB = len(seg) >= 12 && string(seg[:5]) == "Adobe" && seg[11] == 0 && len(sampling) == 3
		}
	}
}

// jpegDecodeBytes bounds the memory Go's decoder takes for a w×h JPEG of components sampled as sampling: a plane
// of a byte per sample, each a whole number of 8×8 blocks of whole MCUs (all planes at full size when the
// subsampling is not one Go's YCbCr has); for a progressive file, 64 coefficients of 4 bytes per block; and the
// 4-byte-a-pixel image that CMYK and RGB files are converted into.
func jpegDecodeBytes(w, h int, sampling []byte, progressive, rgb bool) int64 {
	hMax, vMax := 1, 1
	for _, s := range sampling {
		hMax, vMax = max(hMax, int(s>>4)), max(vMax, int(s&15))
	}
	mcuX, mcuY := int64((w+8*hMax-1)/(8*hMax)), int64((h+8*vMax-1)/(8*vMax))
	var blocks int64
	for _, s := range sampling {
		blocks += mcuX * int64(s>>4) * mcuY * int64(s&15)
	}
	planes := blocks * 64
	goYCbCr := bytes.IndexByte([]byte{0x11, 0x12, 0x21, 0x22, 0x41, 0x42}, sampling[0]) >= 0 // 4:4:4 to 4:1:0
	if len(sampling) == 3 && (sampling[1] != 0x11 || sampling[2] != 0x11 || !goYCbCr) {
		planes = 3 * mcuX * int64(8*hMax) * mcuY * int64(8*vMax)
	}
	total := planes
	if progressive {
		total += blocks * 64 * 4
	}
	if len(sampling) == 4 || rgb {
		total += 4 * int64(w) * int64(h)
	}
	return total
}

// GIF: a header and logical screen descriptor (the canvas) and an optional colour table, then blocks: extensions
// (0x21) and images (0x2C, a descriptor placing the frame on the screen, an optional colour table and LZW data),
// each carrying data in sub-blocks of a length byte and that many bytes, up to the trailer (0x3B). Go decodes the
// first frame only and refuses one outside the screen; the model's client may decode them all.
func readGIFHeader(data []byte) (header, error) {
	if len(data) < 13 {
		return header{}, errors.New("it ends inside its screen descriptor")
	}
	h := header{width: int(binary.LittleEndian.Uint16(data[6:])), height: int(binary.LittleEndian.Uint16(data[8:])),
		passes: 1}
	h.decodeBytes = int64(h.width) * int64(h.height) // the first frame, a byte a pixel, lies within the screen
	p := 13 + gifColorTable(data[10])
	errEnds := errors.New("it ends inside a block")
	for frames := 0; ; {
		if p >= len(data) {
			if frames > 0 { // Go stops after the first frame; a file cut after it still decodes.
				return h, nil
			}
			return h, errEnds
		}
		switch data[p] {
		case 0x21: // extension: a label, then sub-blocks
			p += 2
		case 0x2c:
			if len(data)-p < 11 {
				return h, errEnds
			}
			d := data[p+1:]
			x, y := int(binary.LittleEndian.Uint16(d)), int(binary.LittleEndian.Uint16(d[2:]))
			w, ht := int(binary.LittleEndian.Uint16(d[4:])), int(binary.LittleEndian.Uint16(d[6:]))
			frames++
			if x+w > h.width || y+ht > h.height {
				return h, fmt.Errorf("its frame %d of %d×%d at (%d, %d) falls outside the %d×%d screen", frames, w, ht, x,
					y, h.width, h.height)
			}
			p += 10 + gifColorTable(d[8]) + 1 // the descriptor, a local colour table, the LZW code size
		case 0x3b:
			if frames == 0 {
				return h, errors.New("it has no frame")
			}
			return h, nil
		default:
			return h, fmt.Errorf("it has an unknown block type 0x%02x", data[p])
		}
		for { // sub-blocks, up to one of length 0
			if p >= len(data) {
				return h, errEnds
			}
			n := int(data[p])
			p += 1 + n
			if n == 0 {
				break
			}
		}
	}
}

// gifColorTable is the size of the colour table that a descriptor's packed field announces.
func gifColorTable(fields byte) int {
	if fields&0x80 == 0 {
		return 0
	}
	return 3 << (1 + fields&7)
}

// WebP: a RIFF container of chunks (a FourCC, a 4-byte little-endian length, the data, a pad byte to an even
// length). A simple file is one VP8 (lossy) or VP8L (lossless) frame; an extended one starts with VP8X, which
// declares the canvas, and holds either one frame (after an ALPH chunk of its transparency, decoded at the
// canvas size) or, animated, ANMF chunks each placing a frame of its own size on the canvas. Every frame's own
// header must agree with the place its container gives it: x/image/webp decodes the frame as the frame says.
func readWebPHeader(data []byte) (header, error) {
	h := header{passes: 1}
	end := min(8+int64(binary.LittleEndian.Uint32(data[4:])), int64(len(data)))
	var (
		extended bool
		frames   int
	)
	err := riffChunks(data[12:end], func(id string, body []byte) error {
		switch id {
		case "VP8X":
			if extended || len(body) != 10 {
				return errors.New("its VP8X chunk is malformed or repeated")
			}
			extended = true
			h.width, h.height = 1+int(le24At(body[4:])), 1+int(le24At(body[7:]))
			if frames > 0 {
				return errors.New("its VP8X chunk comes after its frame")
			}
		case "ALPH":
			if !extended || len(body) == 0 {
				return errors.New("its ALPH chunk is malformed or out of place")
			}
			// Raw alpha is a byte a pixel; compressed alpha is a lossless image of the canvas, decoded whole.
			h.decodeBytes += int64(h.width) * int64(h.height)
			if body[0]&3 != 0 {
				cost, err := vp8lCost(body[1:], h.width, h.height)
				if err != nil {
					return fmt.Errorf("its ALPH chunk: %w", err)
				}
				h.decodeBytes += 8*int64(h.width)*int64(h.height) + cost
			}
		case "VP8 ", "VP8L":
			frames++
			if frames > 1 {
				return errors.New("it has more than one frame outside an animation")
			}
			w, ht, err := webpFrame(id, body)
			if err != nil {
				return err
			}
			if !extended {
				h.width, h.height = w, ht
			} else if w != h.width || ht != h.height {
				return fmt.Errorf("its frame is %d×%d pixels, not the %d×%d of its canvas", w, ht, h.width, h.height)
			}
			cost, err := webpFrameCost(id, body, w, ht)
			h.decodeBytes += cost
			return err
		case "ANMF":
			frames++
			if !extended || len(body) < 16 {
				return errors.New("its ANMF chunk is malformed or out of place")
			}
			x, y := 2*int(le24At(body)), 2*int(le24At(body[3:]))
			w, ht := 1+int(le24At(body[6:])), 1+int(le24At(body[9:]))
			if x+w > h.width || y+ht > h.height {
				return fmt.Errorf("its animation frame %d of %d×%d at (%d, %d) falls outside the %d×%d canvas", frames, w, ht, x,
					y, h.width, h.height)
			}
			return riffChunks(body[16:], func(id string, body []byte) error {
				if id != "VP8 " && id != "VP8L" {
					return nil
				}
				fw, fh, err := webpFrame(id, body)
				if err == nil && (fw != w || fh != ht) {
					err = fmt.Errorf("its animation frame %d is %d×%d pixels, not the %d×%d its ANMF chunk places",
						frames, fw, fh, w, ht)
				}
				return err
			})
		}
		return nil
	})
	if err == nil && frames == 0 {
		err = errors.New("it has no frame")
	}
	if err == nil && int64(h.width)*int64(h.height) > 1<<32-1 {
		err = fmt.Errorf("its canvas of %d×%d pixels is larger than WebP allows", h.width, h.height)
	}
	return h, err
}

// riffChunks calls f with each chunk of data, a sequence of RIFF chunks, until f returns an error.
func riffChunks(data []byte, f func(id string, body []byte) error) error {
	for len(data) > 0 {
		if len(data) < 8 {
			return errPastEnd
		}
		n := int64(binary.LittleEndian.Uint32(data[4:]))
		if n > int64(len(data)-8) {
			return errPastEnd
		}
		if err := f(string(data[:4]), data[8:8+n]); err != nil {
			return err
		}
		data = data[min(8+n+n&1, int64(len(data))):]
	}
	return nil
}

// webpFrame reads the size of a VP8 or VP8L frame from its header.
func webpFrame(id string, body []byte) (w, h int, err error) {
	if id == "VP8 " {
		// A 3-byte frame tag (its low bit clear on a key frame, the only kind a file holds), the start code
		// 9D 01 2A, then 14 bits of width and of height, each with 2 bits of scale the decoders ignore.
		if len(body) < 10 || body[0]&1 != 0 || !bytes.Equal(body[3:6], []byte{0x9d, 0x01, 0x2a}) {
			return 0, 0, errors.New("its VP8 frame header is malformed")
		}
		return int(binary.LittleEndian.Uint16(body[6:]) & 0x3fff), int(binary.LittleEndian.Uint16(body[8:]) & 0x3fff), nil
	}
	// The signature 0x2F, then 14 bits of width-1, 14 of height-1, 1 of alpha and 3 of version (0).
	if len(body) < 5 || body[0] != 0x2f || body[4]>>5 != 0 {
		return 0, 0, errors.New("its VP8L frame header is malformed")
	}
	bits := binary.LittleEndian.Uint32(body[1:])
	return 1 + int(bits&0x3fff), 1 + int(bits>>14&0x3fff), nil
}

// webpFrameCost bounds what decoding a w×h frame (read by webpFrame) takes: a lossy frame decodes into YCbCr
// 4:2:0 of whole 16×16 macroblocks, a lossless one into 4 bytes a pixel (twice, with its transforms) after its
// entropy codes (vp8lCost).
func webpFrameCost(id string, body []byte, w, h int) (int64, error) {
	if id == "VP8 " {
		mb := int64((w+15)/16) * int64((h+15)/16)
		return mb * 16 * 16 * 3 / 2, nil
	}
	codes, err := vp8lCost(body[5:], w, h)
	return 8*int64(w)*int64(h) + codes, err
}

// le24At reads a 3-byte little-endian number, as VP8X and ANMF write sizes and offsets.
func le24At(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 }
