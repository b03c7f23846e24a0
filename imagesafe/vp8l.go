package imagesafe

import (
	"errors"
	"fmt"
)

// A lossless (VP8L) frame costs more than its pixels. golang.org/x/image/vp8l reads, before any pixel, the
// transforms (each with an image of its own), then the entropy image, which maps each tile of the frame to a
// group of five Huffman codes, and allocates one group for every index up to the largest that image names: 2,680
// bytes each, plus 8 bytes for each node of each code. A 164 KB file of a 2000×1 frame whose entropy image names
// group 65535 takes 170 MiB that way. vp8lCost walks the bitstream as the decoder does, up to the first pixel, and
// counts what it allocates; a frame that names more groups than it has tiles (which no encoder writes, since a
// group no tile uses is never read) is refused outright.

const (
	vp8lGroupBytes = 5 * (24 + 4<<7) // a group: five trees, each a slice header and a 128-entry lookup table
	vp8lNodeBytes  = 8               // a node of a tree: a symbol and a child index

	vp8lLiteralCodes  = 256
	vp8lLengthCodes   = 24
	vp8lDistanceCodes = 40
	vp8lMaxCodeLength = 15
)

var (
	errVP8LEnds  = errors.New("its lossless frame ends inside its entropy codes")
	errVP8LCodes = errors.New("its lossless frame has an invalid Huffman code")

	// vp8lAlphabets are the sizes of a group's five alphabets: green with the length codes (and the colour cache),
	// red, blue, alpha, distance.
	vp8lAlphabets = [5]int{vp8lLiteralCodes + vp8lLengthCodes, vp8lLiteralCodes, vp8lLiteralCodes,
		vp8lLiteralCodes, vp8lDistanceCodes}
	// The order in which a code's lengths of code lengths are written, and the repeat codes' extra bits and
	// offsets (VP8L specification, section 5.2.2).
	vp8lCodeLengthOrder = [19]uint8{17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	vp8lRepeatBits      = [3]uint8{2, 3, 7}
	vp8lRepeatOffsets   = [3]uint8{3, 3, 11}
	// vp8lDistanceMap maps the first 120 distance codes to a two-dimensional offset (section 4.2.2).
	vp8lDistanceMap = [120]uint8{
		0x18, 0x07, 0x17, 0x19, 0x28, 0x06, 0x27, 0x29, 0x16, 0x1a, 0x26, 0x2a, 0x38, 0x05, 0x37, 0x39, 0x15, 0x1b,
		0x36, 0x3a, 0x25, 0x2b, 0x48, 0x04, 0x47, 0x49, 0x14, 0x1c, 0x35, 0x3b, 0x46, 0x4a, 0x24, 0x2c, 0x58, 0x45,
		0x4b, 0x34, 0x3c, 0x03, 0x57, 0x59, 0x13, 0x1d, 0x56, 0x5a, 0x23, 0x2d, 0x44, 0x4c, 0x55, 0x5b, 0x33, 0x3d,
		0x68, 0x02, 0x67, 0x69, 0x12, 0x1e, 0x66, 0x6a, 0x22, 0x2e, 0x54, 0x5c, 0x43, 0x4d, 0x65, 0x6b, 0x32, 0x3e,
		0x78, 0x01, 0x77, 0x79, 0x53, 0x5d, 0x11, 0x1f, 0x64, 0x6c, 0x42, 0x4e, 0x76, 0x7a, 0x21, 0x2f, 0x75, 0x7b,
		0x31, 0x3f, 0x63, 0x6d, 0x52, 0x5e, 0x00, 0x74, 0x7c, 0x41, 0x4f, 0x10, 0x20, 0x62, 0x6e, 0x30, 0x73, 0x7d,
		0x51, 0x5f, 0x40, 0x72, 0x7e, 0x61, 0x6f, 0x50, 0x71, 0x7f, 0x60, 0x70,
	}
)

// vp8lCost bounds what decoding a w×h lossless frame allocates besides its pixels: its transforms' images, its
// entropy image and every Huffman code the decoder builds. stream is the bitstream after the 5-byte header (as an
// ALPH chunk holds it).
func vp8lCost(stream []byte, w, h int) (int64, error) {
	d := &vp8lWalk{bits: bitReader{data: stream}}
	seen := [4]bool{}
	for {
		more, err := d.bits.read(1)
		if err != nil {
			return 0, err
		}
		if more == 0 {
			break
		}
		kind, err := d.bits.read(2)
		if err != nil {
			return 0, err
		}
		if seen[kind] {
			return 0, errors.New("its lossless frame repeats a transform")
		}
		seen[kind] = true
		switch kind {
		case 0, 1: // predictor, cross-colour: an image of one pixel per tile
			b, err := d.bits.read(3)
			if err != nil {
				return 0, err
			}
			if _, err := d.image(tiles(w, b+2), tiles(h, b+2), false); err != nil {
				return 0, err
			}
		case 3: // colour indexing: a palette, then pixels packed several to a byte
			n, err := d.bits.read(8)
			if err != nil {
				return 0, err
			}
			if _, err := d.image(int(n)+1, 1, false); err != nil {
				return 0, err
			}
			d.cost += 4 * 256 // the palette is kept at 256 entries
			switch {
			case n+1 <= 2:
				w = tiles(w, 3)
			case n+1 <= 4:
				w = tiles(w, 2)
			case n+1 <= 16:
				w = tiles(w, 1)
			}
		}
	}
	if _, err := d.image(w, h, true); err != nil {
		return 0, err
	}
	return d.cost, nil
}

// tiles is how many tiles of 2^bits pixels cover n pixels.
func tiles(n int, bits uint32) int { return (n + 1<<bits - 1) >> bits }

// vp8lWalk reads a lossless bitstream and adds up what decoding it allocates.
type vp8lWalk struct {
	bits bitReader
	cost int64
}

// image reads an entropy-coded image of w×h pixels as the decoder's decodePix does. A sub-image (a transform's,
// the entropy image) is decoded, and its pixels returned as ARGB; of the frame itself (top) only the codes are
// read, which is all that is allocated before its pixels.
func (d *vp8lWalk) image(w, h int, top bool) ([]uint32, error) {
	ccBits := uint32(0)
	if use, err := d.bits.read(1); err != nil {
		return nil, err
	} else if use != 0 {
		if ccBits, err = d.bits.read(4); err != nil {
			return nil, err
		}
		if ccBits < 1 || ccBits > 11 {
			return nil, errors.New("its lossless frame has an invalid colour cache")
		}
		d.cost += 4 << ccBits
	}
	groups := 1
	if top {
		use, err := d.bits.read(1)
		if err != nil {
			return nil, err
		}
		if use != 0 {
			b, err := d.bits.read(3)
			if err != nil {
				return nil, err
			}
			tw, th := tiles(w, b+2), tiles(h, b+2)
			meta, err := d.image(tw, th, false)
			if err != nil {
				return nil, err
			}
			largest := 0
			for _, p := range meta {
				largest = max(largest, int(p>>8&0xffff)) // the group index is red and green
			}
			if largest >= tw*th {
				return nil, fmt.Errorf("its lossless frame names %d entropy groups for its %d tiles", largest+1, tw*th)
			}
			groups = largest + 1
		}
	}
	d.cost += int64(groups) * vp8lGroupBytes
	var first [5]huffman
	for g := range groups {
		for i, size := range vp8lAlphabets {
			if i == 0 && ccBits > 0 {
				size += 1 << ccBits
			}
			t, err := d.huffman(size)
			if err != nil {
				return nil, err
			}
			if g == 0 {
				first[i] = t
			}
		}
	}
	if top {
		return nil, nil
	}
	d.cost += 4 * int64(w) * int64(h)
	return d.pixels(w, h, &first, ccBits)
}

// pixels decodes w×h pixels coded with the one group g (a sub-image has no entropy image of its own).
func (d *vp8lWalk) pixels(w, h int, g *[5]huffman, ccBits uint32) ([]uint32, error) {
	pix := make([]uint32, w*h)
	var cache []uint32
	if ccBits > 0 {
		cache = make([]uint32, 1<<ccBits)
	}
	cached := 0
	for p := 0; p < len(pix); {
		green, err := g[0].next(&d.bits)
		if err != nil {
			return nil, err
		}
		switch {
		case green < vp8lLiteralCodes:
			var c [3]uint32 // red, blue, alpha
			for i := range c {
				if c[i], err = g[i+1].next(&d.bits); err != nil {
					return nil, err
				}
			}
			pix[p] = c[2]<<24 | c[0]<<16 | green<<8 | c[1]
			p++
		case green < vp8lLiteralCodes+vp8lLengthCodes:
			length, err := d.lz77(green - vp8lLiteralCodes)
			if err != nil {
				return nil, err
			}
			sym, err := g[4].next(&d.bits)
			if err != nil {
				return nil, err
			}
			code, err := d.lz77(sym)
			if err != nil {
				return nil, err
			}
			dist := distance(w, code)
			if p+length > len(pix) || p-dist < 0 {
				return nil, errors.New("its lossless frame has an invalid backward reference")
			}
			for end := p + length; p < end; p++ {
				pix[p] = pix[p-dist]
			}
		default:
			for ; cached < p; cached++ {
				cache[(pix[cached]*0x1e35a7bd)>>(32-ccBits)] = pix[cached]
			}
			i := int(green - vp8lLiteralCodes - vp8lLengthCodes)
			if i >= len(cache) {
				return nil, errors.New("its lossless frame has an invalid colour cache index")
			}
			pix[p] = cache[i]
			p++
		}
	}
	return pix, nil
}

// lz77 reads a backward reference's length or distance code's value (section 4.2.2).
func (d *vp8lWalk) lz77(sym uint32) (int, error) {
	if sym < 4 {
		return int(sym) + 1, nil
	}
	extra := (sym - 2) >> 1
	n, err := d.bits.read(extra)
	return int((2+sym&1)<<extra+n) + 1, err
}

// distance maps a distance code to a distance in pixels of an image w wide.
func distance(w, code int) int {
	if code > len(vp8lDistanceMap) {
		return code - len(vp8lDistanceMap)
	}
	c := int(vp8lDistanceMap[code-1])
	if d := (c>>4)*w + 8 - c&0xf; d >= 1 {
		return d
	}
	return 1
}

// huffman reads one Huffman code of an alphabet of size symbols, and counts the nodes the decoder builds for it.
func (d *vp8lWalk) huffman(size int) (huffman, error) {
	simple, err := d.bits.read(1)
	if err != nil {
		return huffman{}, err
	}
	var lengths []uint8
	if simple != 0 {
		n, err := d.bits.read(1)
		if err != nil {
			return huffman{}, err
		}
		wide, err := d.bits.read(1)
		if err != nil {
			return huffman{}, err
		}
		var syms [2]uint32
		if syms[0], err = d.bits.read(1 + 7*wide); err != nil {
			return huffman{}, err
		}
		if n == 1 {
			if syms[1], err = d.bits.read(8); err != nil {
				return huffman{}, err
			}
		}
		for _, s := range syms[:n+1] {
			if int(s) >= size {
				return huffman{}, errVP8LCodes
			}
		}
		d.cost += int64(2*n+1) * vp8lNodeBytes
		if n == 0 {
			return huffman{single: true, symbols: []uint16{uint16(syms[0])}}, nil
		}
		t := huffman{symbols: []uint16{uint16(syms[0]), uint16(syms[1])}}
		t.counts[1] = 2
		return t, nil
	}
	n, err := d.bits.read(4)
	if err != nil {
		return huffman{}, err
	}
	var lengthsOfLengths [19]uint8
	for i := range n + 4 {
		l, err := d.bits.read(3)
		if err != nil {
			return huffman{}, err
		}
		lengthsOfLengths[vp8lCodeLengthOrder[i]] = uint8(l)
	}
	lengthCode, err := canonical(lengthsOfLengths[:])
	if err != nil {
		return huffman{}, err
	}
	if lengths, err = d.codeLengths(size, &lengthCode); err != nil {
		return huffman{}, err
	}
	t, err := canonical(lengths)
	if err != nil {
		return huffman{}, err
	}
	// The nodes are kept; the code's lengths and codes, 4 bytes a symbol each, are garbage after it is built.
	d.cost += int64(2*len(t.symbols)-1)*vp8lNodeBytes + 2*4*int64(size)
	return t, nil
}

// codeLengths reads the code lengths of an alphabet of size symbols, themselves coded with lengthCode.
func (d *vp8lWalk) codeLengths(size int, lengthCode *huffman) ([]uint8, error) {
	out := make([]uint8, size)
	limit := size
	if use, err := d.bits.read(1); err != nil {
		return nil, err
	} else if use != 0 {
		n, err := d.bits.read(3)
		if err != nil {
			return nil, err
		}
		m, err := d.bits.read(2 + 2*n)
		if err != nil {
			return nil, err
		}
		if limit = int(m) + 2; limit > size {
			return nil, errVP8LCodes
		}
	}
	prev := uint8(8)
	for s := 0; s < size && limit > 0; limit-- {
		l, err := lengthCode.next(&d.bits)
		if err != nil {
			return nil, err
		}
		if l < 16 {
			out[s] = uint8(l)
			s++
			if l != 0 {
				prev = uint8(l)
			}
			continue
		}
		r, err := d.bits.read(uint32(vp8lRepeatBits[l-16]))
		if err != nil {
			return nil, err
		}
		r += uint32(vp8lRepeatOffsets[l-16])
		if s+int(r) > size {
			return nil, errVP8LCodes
		}
		v := uint8(0)
		if l == 16 {
			v = prev
		}
		for ; r > 0; r-- {
			out[s] = v
			s++
		}
	}
	return out, nil
}

// huffman is a canonical Huffman code: how many codes each length has, and the symbols in code order. A code of
// one symbol takes no bits.
type huffman struct {
	single  bool
	counts  [vp8lMaxCodeLength + 1]uint16
	symbols []uint16
}

// canonical makes the code that lengths (one per symbol, 0 for none) describe; an over-subscribed one is refused,
// as the decoder refuses it.
func canonical(lengths []uint8) (huffman, error) {
	var t huffman
	for _, l := range lengths {
		if l > vp8lMaxCodeLength {
			return t, errVP8LCodes
		}
		if l > 0 {
			t.counts[l]++
		}
	}
	offsets := [vp8lMaxCodeLength + 2]int{}
	left := 1
	for l := 1; l <= vp8lMaxCodeLength; l++ {
		if left = left*2 - int(t.counts[l]); left < 0 {
			return t, errVP8LCodes
		}
		offsets[l+1] = offsets[l] + int(t.counts[l])
	}
	t.symbols = make([]uint16, offsets[vp8lMaxCodeLength+1])
	for s, l := range lengths {
		if l > 0 {
			t.symbols[offsets[l]] = uint16(s)
			offsets[l]++
		}
	}
	switch len(t.symbols) {
	case 0:
		return t, errVP8LCodes
	case 1:
		t.single = true
	}
	return t, nil
}

// next reads one symbol: the code's bits come first to last, one at a time.
func (t *huffman) next(b *bitReader) (uint32, error) {
	if t.single {
		return uint32(t.symbols[0]), nil
	}
	code, first, index := 0, 0, 0
	for l := 1; l <= vp8lMaxCodeLength; l++ {
		bit, err := b.read(1)
		if err != nil {
			return 0, err
		}
		code |= int(bit)
		if n := int(t.counts[l]); code-first < n {
			return uint32(t.symbols[index+code-first]), nil
		} else {
			index, first = index+n, first+n
		}
		first, code = first<<1, code<<1
	}
	return 0, errVP8LCodes
}

// bitReader reads a lossless bitstream: bits from the least significant of each byte on.
type bitReader struct {
	data  []byte
	acc   uint64
	n     uint32
	where int
}

func (b *bitReader) read(n uint32) (uint32, error) {
	for b.n < n {
		if b.where == len(b.data) {
			return 0, errVP8LEnds
		}
		b.acc |= uint64(b.data[b.where]) << b.n
		b.where++
		b.n += 8
	}
	v := uint32(b.acc & (1<<n - 1))
	b.acc >>= n
	b.n -= n
	return v, nil
}
