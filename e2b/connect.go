package e2b

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The Connect protocol (connectrpc.com) with its JSON codec, as envd speaks it. It is small enough to write by
// hand: a unary call is one JSON body each way; a server stream is a sequence of envelopes, each a flags byte, a
// big-endian uint32 length and that many bytes of JSON, the last one flagged end-of-stream.

const (
	connectFlagCompressed = 0x01
	connectFlagEndStream  = 0x02

	// connectMaxMessage bounds the size of one message (or unary answer) this client accepts, so that a corrupt
	// or hostile length cannot make it allocate without limit. envd's largest messages are 32 KiB of output and
	// ListDir answers, far below this.
	connectMaxMessage = 16 << 20

	connectContentTypeUnary  = "application/json"
	connectContentTypeStream = "application/connect+json"
)

// protocolError is an answer that breaks the Connect protocol (an oversized or compressed message, a malformed
// end-of-stream message): envd answered, but not as envd does.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "connect: " + e.msg }

func protocolErrorf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// errStreamCut is a stream that ended (the connection closed) without its end-of-stream envelope: the answer is
// incomplete, whatever the HTTP status said.
var errStreamCut = errors.New("stream cut: the connection ended before the end-of-stream message")

// connectWireError is a Connect error: the body of a failed unary call, or the "error" of an end-of-stream message.
type connectWireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// connectEndStream is the end-of-stream message of a server stream.
type connectEndStream struct {
	Error    *connectWireError   `json:"error"`
	Metadata map[string][]string `json:"metadata"`
}

// connectCodeStatus is the HTTP status that Connect pairs with a code (connect-go's connectCodeToHTTP).
func connectCodeStatus(code string) int {
	switch code {
	case "canceled":
		return 499
	case "invalid_argument", "failed_precondition", "out_of_range":
		return http.StatusBadRequest
	case "deadline_exceeded":
		return http.StatusGatewayTimeout
	case "not_found":
		return http.StatusNotFound
	case "already_exists", "aborted":
		return http.StatusConflict
	case "permission_denied":
		return http.StatusForbidden
	case "resource_exhausted":
		return http.StatusTooManyRequests
	case "unimplemented":
		return http.StatusNotImplemented
	case "unavailable":
		return http.StatusServiceUnavailable
	case "unauthenticated":
		return http.StatusUnauthorized
	default: // unknown, internal, data_loss and codes this client does not know
		return http.StatusInternalServerError
	}
}

// appendEnvelope appends one envelope holding payload to dst.
func appendEnvelope(dst []byte, flags byte, payload []byte) []byte {
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	return append(append(dst, hdr[:]...), payload...)
}

// envelopeReader reads envelopes from a stream. The payload it returns is valid until the next call, so that a
// long stream reuses one buffer.
type envelopeReader struct {
	r   io.Reader
	max int
	hdr [5]byte
	buf []byte
}

// next reads one envelope. A stream that ends cleanly between envelopes returns io.EOF; one that ends inside an
// envelope returns errStreamCut.
func (er *envelopeReader) next() (flags byte, payload []byte, err error) {
	if _, err := io.ReadFull(er.r, er.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, errStreamCut
		}
		return 0, nil, err
	}
	flags = er.hdr[0]
	size := binary.BigEndian.Uint32(er.hdr[1:])
	if uint64(size) > uint64(er.max) {
		return 0, nil, protocolErrorf("message of %d bytes exceeds the limit of %d", size, er.max)
	}
	if cap(er.buf) < int(size) {
		er.buf = make([]byte, size)
	}
	er.buf = er.buf[:size]
	if _, err := io.ReadFull(er.r, er.buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, errStreamCut
		}
		return 0, nil, err
	}
	return flags, er.buf, nil
}

// readConnectStream reads a server stream's envelopes, giving each message to onMessage (the bytes are valid only
// during the call), until the end-of-stream message, which it returns. A stream without one is errStreamCut.
func readConnectStream(r io.Reader, maxMessage int, onMessage func([]byte) error) (*connectEndStream, error) {
	er := &envelopeReader{r: r, max: maxMessage}
	for {
		flags, payload, err := er.next()
		if errors.Is(err, io.EOF) {
			return nil, errStreamCut
		}
		if err != nil {
			return nil, err
		}
		if flags&connectFlagCompressed != 0 {
			return nil, protocolErrorf("compressed message, but the request asked for identity encoding")
		}
		if flags&connectFlagEndStream != 0 {
			var end connectEndStream
			if err := json.Unmarshal(payload, &end); err != nil {
				return nil, protocolErrorf("malformed end-of-stream message: %v", err)
			}
			return &end, nil
		}
		if err := onMessage(payload); err != nil {
			return nil, err
		}
	}
}

// Proto3 JSON scalars that the protocol allows in more than one form.

// pbInt64 is an int64 or uint32 field: proto3 JSON writes 64-bit integers as strings, and parsers accept numbers
// and strings for every integer type.
type pbInt64 int64

func (v *pbInt64) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return nil
	}
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Proto3 JSON also allows an integral value in exponent form, e.g. 1e3.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return fmt.Errorf("invalid integer %s", b)
		}
		n = int64(f)
	}
	*v = pbInt64(n)
	return nil
}

// pbBytes is a bytes field: base64, standard or URL-safe alphabet, padded or not, as proto3 JSON parsers accept.
type pbBytes []byte

func (v *pbBytes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	out, err := enc.DecodeString(s)
	if err != nil {
		return fmt.Errorf("invalid base64 bytes: %w", err)
	}
	*v = out
	return nil
}
