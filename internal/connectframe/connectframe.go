// Package connectframe is the framing of the Connect protocol (connectrpc.com) with its JSON codec, as envd
// speaks it: both the e2b client and the envd emulator in e2b/emulator use it, so that the two ends cannot drift
// apart. A unary call is one JSON body each way; a stream is a sequence of envelopes, each a flags byte, a
// big-endian uint32 length and that many bytes of JSON, a server stream's last one flagged end-of-stream and
// holding {} or {"error":{...}}.
package connectframe

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// HeaderLen is the length of an envelope's header: the flags byte and the payload length.
const HeaderLen = 5

// Envelope flags.
const (
	FlagCompressed byte = 0x01
	FlagEndStream  byte = 0x02
)

// Content types of unary calls and of streams.
const (
	ContentTypeUnary  = "application/json"
	ContentTypeStream = "application/connect+json"
)

// Append appends one envelope holding payload to dst.
func Append(dst []byte, flags byte, payload []byte) []byte {
	var hdr [HeaderLen]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	return append(append(dst, hdr[:]...), payload...)
}

// Write writes one envelope holding payload to w: the header, then the payload itself, never copied.
func Write(w io.Writer, flags byte, payload []byte) error {
	hdr := [HeaderLen]byte{flags}
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// Reader reads envelopes from a stream, refusing any larger than its limit before allocating for it. The payload
// it returns is valid until the next call, so that a long stream reuses one buffer.
type Reader struct {
	r   io.Reader
	max int
	hdr [HeaderLen]byte
	buf []byte
}

// NewReader returns a Reader of r that accepts payloads of at most maxPayload bytes.
func NewReader(r io.Reader, maxPayload int) *Reader { return &Reader{r: r, max: maxPayload} }

// TooLargeError is an envelope whose header declares a payload over the reader's limit.
type TooLargeError struct {
	Size uint32
	Max  int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the limit of %d", e.Size, e.Max)
}

// IncompleteError is an envelope that the stream did not deliver whole: it ended (Err is io.EOF or
// io.ErrUnexpectedEOF) or failed (Err is the failure) inside the header or the payload.
type IncompleteError struct {
	// Header tells that the header itself is incomplete; otherwise the payload is, and Size is its declared length.
	Header bool
	Size   uint32
	Err    error
}

func (e *IncompleteError) Error() string {
	if e.Header {
		return fmt.Sprintf("incomplete envelope header: %v", e.Err)
	}
	return fmt.Sprintf("incomplete envelope: promised %d bytes: %v", e.Size, e.Err)
}

func (e *IncompleteError) Unwrap() error { return e.Err }

// Next reads one envelope. A stream that ends cleanly between envelopes returns the reader's io.EOF; one that ends or
// fails inside an envelope returns an *IncompleteError, and an envelope over the limit a *TooLargeError.
func (r *Reader) Next() (flags byte, payload []byte, err error) {
	if n, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		return 0, nil, &IncompleteError{Header: true, Err: err}
	}
	flags = r.hdr[0]
	size := binary.BigEndian.Uint32(r.hdr[1:])
	if uint64(size) > uint64(r.max) {
		return 0, nil, &TooLargeError{Size: size, Max: r.max}
	}
	if cap(r.buf) < int(size) {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		return 0, nil, &IncompleteError{Size: size, Err: err}
	}
	return flags, r.buf, nil
}

// Error is a Connect error as the wire carries it: the body of a failed unary call, or the "error" of an
// end-of-stream message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// EndStream is the end-of-stream message of a server stream.
type EndStream struct {
	Error    *Error              `json:"error,omitempty"`
	Metadata map[string][]string `json:"metadata,omitempty"`
}

// MarshalEndStream is the end-of-stream payload that ends a stream with rerr, or successfully when rerr is nil,
// as connect-go writes it (encoding/json): {} or {"error":{"code":...,"message":...}}.
func MarshalEndStream(rerr *Error) []byte {
	if rerr == nil {
		return []byte("{}")
	}
	data, _ := json.Marshal(EndStream{Error: rerr}) // strings only: it cannot fail
	return data
}

// CodeStatus is the HTTP status that Connect pairs with a code (connect-go's connectCodeToHTTP); codes it does
// not know are 500, as unknown, internal and data_loss are.
func CodeStatus(code string) int {
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
	default:
		return http.StatusInternalServerError
	}
}
