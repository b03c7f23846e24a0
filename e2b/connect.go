package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
)

// The Connect protocol (connectrpc.com) with its JSON codec, as envd speaks it; the framing is shared with the
// emulator in internal/connectframe.

// connectMaxMessage bounds the size of one message (or unary answer) this client accepts, so that a corrupt or
// hostile length cannot make it allocate without limit. envd's largest messages are 32 KiB of output and ListDir
// answers, far below this.
const connectMaxMessage = 16 << 20

// protocolError is an answer that breaks the Connect protocol (an oversized or compressed message, a malformed
// end-of-stream message): envd answered, but not as envd does.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "connect: " + e.msg }

func protocolErrorf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// errStreamCut is a stream that ended (the connection closed) without its end-of-stream envelope: the answer is
// incomplete, whatever the HTTP status said.
var errStreamCut = fmt.Errorf("%w: the connection ended before the end-of-stream message", ErrStreamCut)

// readConnectStream reads a server stream's envelopes, giving each message to onMessage (the bytes are valid only
// during the call), until the end-of-stream message, which it returns. A stream without one is errStreamCut.
func readConnectStream(r io.Reader, maxMessage int, onMessage func([]byte) error) (*connectframe.EndStream, error) {
	er := connectframe.NewReader(r, maxMessage)
	for {
		flags, payload, err := er.Next()
		if err != nil {
			return nil, streamReadError(err)
		}
		if flags&connectframe.FlagCompressed != 0 {
			return nil, protocolErrorf("compressed message, but the request asked for identity encoding")
		}
		if flags&connectframe.FlagEndStream != 0 {
			var end connectframe.EndStream
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

// streamReadError is what a failure to read the next envelope means here: the stream's end before its
// end-of-stream message is errStreamCut, an oversized envelope a protocol error, and the transport's own failure
// stays itself.
func streamReadError(err error) error {
	var tooLarge *connectframe.TooLargeError
	var incomplete *connectframe.IncompleteError
	switch {
	case errors.As(err, &tooLarge):
		return protocolErrorf("%v", tooLarge)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errStreamCut
	case errors.As(err, &incomplete):
		return incomplete.Err
	default:
		return err
	}
}

// Proto3 JSON scalars that the protocol allows in more than one form.

// pbInt64 is an int64 or uint32 field: proto3 JSON writes 64-bit integers as strings, and parsers accept numbers
// and strings for every integer type.
type pbInt64 int64

func (v *pbInt64) UnmarshalJSON(b []byte) error {
	s, null := connectframe.IntegerText(b)
	if null {
		return nil
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
	out, err := connectframe.DecodeBytes(s)
	if err != nil {
		return fmt.Errorf("invalid base64 bytes: %w", err)
	}
	*v = out
	return nil
}
