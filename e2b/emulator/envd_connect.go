package emulator

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
)

// The server side of the Connect protocol with the JSON codec, answering byte for byte as envd (connect-go with
// protojson) does: unary calls answer application/json, or on error the HTTP status of the code with
// {"code","message"}; server streams answer 200 application/connect+json with envelopes, the last one flagged
// end-of-stream and holding {} or {"error":{...}}.

// maxRequestMessage bounds a request message; envd's requests are small (SendInput carries the largest).
const maxRequestMessage = 8 << 20

// rpcError is a Connect error: a code from connect's vocabulary and a message, in the wire shape the client
// reads.
type rpcError connectframe.Error

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

func rpcErrorf(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// pbJSON marshals an answer as protojson does: no HTML escaping, no trailing newline. Field order and omitted
// zero values come from the struct definitions.
func pbJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every answer is a plain struct of strings, numbers and maps; failing to encode one is a bug here.
		panic(fmt.Sprintf("emulator: encode answer: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// writeUnary answers a unary call.
func writeUnary(w http.ResponseWriter, answer any) {
	h := w.Header()
	h.Set("Content-Type", connectframe.ContentTypeUnary)
	h.Set("Accept-Encoding", "gzip")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(pbJSON(answer))
}

// writeUnaryError answers a failed unary call. connect-go marshals errors with encoding/json.
func writeUnaryError(w http.ResponseWriter, err *rpcError) {
	h := w.Header()
	h.Set("Content-Type", connectframe.ContentTypeUnary)
	h.Set("Accept-Encoding", "gzip")
	w.WriteHeader(connectframe.CodeStatus(err.Code))
	data, _ := json.Marshal(err)
	_, _ = w.Write(data)
}

// streamWriter writes a server stream's envelopes, flushing each so that the client sees events as they happen.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	frames  int
	// cutAfter aborts the stream (no end-of-stream message, connection closed) once this many messages were sent;
	// 0 never.
	cutAfter int
	msg      []byte
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w)}
}

func (s *streamWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", connectframe.ContentTypeStream)
	h.Set("Connect-Accept-Encoding", "gzip")
	s.w.WriteHeader(http.StatusOK)
}

func (s *streamWriter) writeFrame(flags byte, payload []byte) error {
	s.start()
	if s.cutAfter > 0 && s.frames >= s.cutAfter {
		abortStream()
	}
	s.frames++
	if err := connectframe.Write(s.w, flags, payload); err != nil {
		return err
	}
	return s.rc.Flush()
}

// send writes one message.
func (s *streamWriter) send(msg any) error { return s.writeFrame(0, pbJSON(msg)) }

// sendOutput writes a data event, {"event":{"data":{"stdout":"<base64>"}}} as protojson writes it, without the
// intermediate copies of a generic encoder: output is most of what a stream carries.
func (s *streamWriter) sendOutput(stream outputStream, data []byte) error {
	prefix := `{"event":{"data":{"` + string(stream) + `":"`
	const suffix = `"}}}`
	n := len(prefix) + base64.StdEncoding.EncodedLen(len(data)) + len(suffix)
	if cap(s.msg) < n {
		s.msg = make([]byte, n)
	}
	msg := s.msg[:n]
	copy(msg, prefix)
	base64.StdEncoding.Encode(msg[len(prefix):], data)
	copy(msg[n-len(suffix):], suffix)
	return s.writeFrame(0, msg)
}

// end writes the end-of-stream message: {} or {"error":{...}}. connect-go marshals it with encoding/json.
func (s *streamWriter) end(rerr *rpcError) error {
	return s.writeFrame(connectframe.FlagEndStream, connectframe.MarshalEndStream((*connectframe.Error)(rerr)))
}

// abortStream ends the handler without an end-of-stream message and closes the connection, as when a sandbox
// stops under an open stream. net/http recovers this panic without logging it.
func abortStream() { panic(http.ErrAbortHandler) }

// isStreaming reports whether a procedure is a server stream.
func isStreaming(procedure string) bool {
	switch procedure {
	case "process.Process/Start", "process.Process/Connect", "filesystem.Filesystem/WatchDir":
		return true
	}
	return false
}

// envelopeError is envd's answer to a request envelope that cannot be read.
func envelopeError(err error) *rpcError {
	var tooLarge *connectframe.TooLargeError
	var incomplete *connectframe.IncompleteError
	switch {
	case errors.As(err, &tooLarge):
		return rpcErrorf("resource_exhausted", "message size %d is larger than configured max %d",
			tooLarge.Size, tooLarge.Max)
	case errors.As(err, &incomplete) && !incomplete.Header:
		return rpcErrorf("invalid_argument", "protocol error: promised %d bytes in enveloped message, got fewer: %v",
			incomplete.Size, incomplete.Err)
	case errors.As(err, &incomplete):
		err = incomplete.Err
	}
	return rpcErrorf("invalid_argument", "protocol error: incomplete envelope: %v", err)
}

// readRequest reads a call's request message: the body of a unary call, or the single envelope of a stream.
func readRequest(r *http.Request, streaming bool) ([]byte, *rpcError) {
	body := io.LimitReader(r.Body, maxRequestMessage+connectframe.HeaderLen)
	if !streaming {
		var rd io.Reader = body
		if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
			if enc != "gzip" {
				return nil, rpcErrorf("unimplemented", "unknown compression %q: supported encodings are gzip", enc)
			}
			zr, err := gzip.NewReader(body)
			if err != nil {
				return nil, rpcErrorf("invalid_argument", "decompress: %v", err)
			}
			rd = io.LimitReader(zr, maxRequestMessage+1)
		}
		data, err := io.ReadAll(rd)
		if err != nil {
			return nil, rpcErrorf("invalid_argument", "read message: %v", err)
		}
		if len(data) > maxRequestMessage {
			return nil, rpcErrorf("resource_exhausted", "message size %d is larger than configured max %d",
				len(data), maxRequestMessage)
		}
		return data, nil
	}
	er := connectframe.NewReader(body, maxRequestMessage)
	flags, data, err := er.Next()
	if err != nil {
		return nil, envelopeError(err)
	}
	// Like connect-go, envd reads the request to its end before it answers, and refuses a second message.
	data = bytes.Clone(data)
	if _, _, err := er.Next(); err == nil {
		return nil, rpcErrorf("unimplemented", "unary request has multiple messages")
	} else if !errors.Is(err, io.EOF) {
		return nil, envelopeError(err)
	}
	if flags&connectframe.FlagCompressed != 0 {
		enc := r.Header.Get("Connect-Content-Encoding")
		if enc != "gzip" {
			return nil, rpcErrorf("internal", "protocol error: received compressed message without compression support")
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, rpcErrorf("invalid_argument", "decompress: %v", err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, maxRequestMessage+1)); err != nil || len(data) > maxRequestMessage {
			return nil, rpcErrorf("invalid_argument", "decompress: message too large or corrupt")
		}
	}
	return data, nil
}

// decodeRequest unmarshals a request as connect-go's JSON codec does (unknown fields are ignored).
func decodeRequest(data []byte, v any, typeName string) *rpcError {
	if len(data) == 0 {
		return rpcErrorf("invalid_argument", "unmarshal into %s: zero-length payload is not a valid JSON object", typeName)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return rpcErrorf("invalid_argument", "unmarshal into %s: %v", typeName, err)
	}
	return nil
}

// connectTimeout parses Connect-Timeout-Ms as connect-go does before any handler runs.
func connectTimeout(h string) (time.Duration, *rpcError) {
	if h == "" {
		return 0, nil
	}
	if len(h) > 10 {
		return 0, rpcErrorf("invalid_argument", "parse timeout: %q has >10 digits", h)
	}
	ms, err := strconv.ParseInt(h, 10, 64)
	if err != nil {
		return 0, rpcErrorf("invalid_argument", "parse timeout: %v", err)
	}
	if ms < 0 {
		return 0, rpcErrorf("invalid_argument", "parse timeout: %q is negative", h)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// checkContentType tells whether a request's content type fits the procedure's kind; a mismatch is answered
// 415 by connect-go.
func checkContentType(r *http.Request, streaming bool) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return false
	}
	if streaming {
		return mt == connectframe.ContentTypeStream
	}
	return mt == connectframe.ContentTypeUnary
}
