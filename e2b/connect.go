package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
