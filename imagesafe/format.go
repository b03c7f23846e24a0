// Package imagesafe shows images from a sandbox to a model without letting a file decide what showing it costs:
// it names a file's format by its content, walks each format's structure the way its decoder will (so that a
// file whose header understates what decoding it allocates is refused before anything is decoded), and scales
// an image down to a client's limits with a bounded number of decodes at once, fairly shared among owners.
package imagesafe

import "bytes"

// Images e2b_read_file shows the model, by their first bytes (a name proves nothing: plot.png may be anything,
// and a chart saved without an extension is still a chart). SVG is text and is read as text.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
)

// MIME names the image format of a file's first bytes, or "" when they start no format a model reads.
func MIME(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		return JPEG
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return GIF
	case len(head) >= 12 && bytes.Equal(head[:4], []byte("RIFF")) && bytes.Equal(head[8:12], []byte("WEBP")):
		return WebP
	}
	return ""
}

// FormatName is how an answer names a MIME type to a person.
func FormatName(mime string) string {
	switch mime {
	case PNG:
		return "PNG"
	case JPEG:
		return "JPEG"
	case GIF:
		return "GIF"
	case WebP:
		return "WebP"
	}
	return mime
}
