package connectframe

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"testing/iotest"
)

func TestAppend(t *testing.T) {
	got := Append(nil, 0, []byte(`{"a":1}`))
	want := []byte{0, 0, 0, 0, 7, '{', '"', 'a', '"', ':', '1', '}'}
	if !bytes.Equal(got, want) {
		t.Fatalf("envelope = %v, want %v", got, want)
	}
	end := Append([]byte("x"), FlagEndStream, []byte("{}"))
	if !bytes.Equal(end, []byte{'x', 2, 0, 0, 0, 2, '{', '}'}) {
		t.Fatalf("end envelope = %v", end)
	}
}

// writeRecorder keeps each Write apart, to show that Write does not copy the payload into a joined buffer.
type writeRecorder struct{ writes [][]byte }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func TestWrite(t *testing.T) {
	var w writeRecorder
	payload := []byte(`{"event":{"keepalive":{}}}`)
	if err := Write(&w, FlagEndStream, payload); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 2 || !bytes.Equal(bytes.Join(w.writes, nil), Append(nil, FlagEndStream, payload)) {
		t.Fatalf("writes = %q, want the header then the payload", w.writes)
	}
	fail := errors.New("closed")
	if err := Write(errWriter{fail}, 0, payload); !errors.Is(err, fail) {
		t.Fatalf("err = %v, want the writer's", err)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func TestReaderNext(t *testing.T) {
	type envelope struct {
		flags   byte
		payload string
	}
	broken := errors.New("connection reset")
	tests := []struct {
		name      string
		stream    io.Reader
		max       int
		want      []envelope
		wantEOF   bool   // the last error is the clean io.EOF
		tooLarge  uint32 // the last error is a *TooLargeError of this size
		cut       bool   // the last error is an *IncompleteError that ended the stream
		cutHeader bool   // ... inside the header
		cutErr    error  // the last error is an *IncompleteError wrapping this failure
	}{
		{
			name:    "envelopes then end",
			stream:  bytes.NewReader(bytes.Join([][]byte{Append(nil, 0, []byte(`{"a":1}`)), Append(nil, FlagEndStream, []byte(`{}`))}, nil)),
			want:    []envelope{{0, `{"a":1}`}, {FlagEndStream, `{}`}},
			wantEOF: true,
		},
		{name: "empty", stream: bytes.NewReader(nil), wantEOF: true},
		{name: "empty payload", stream: bytes.NewReader(Append(nil, 0, nil)), want: []envelope{{0, ""}}, wantEOF: true},
		{name: "cut inside header", stream: bytes.NewReader(append(Append(nil, 0, []byte(`{}`)), 0, 0)), want: []envelope{{0, `{}`}}, cut: true, cutHeader: true},
		{name: "cut inside payload", stream: bytes.NewReader(Append(nil, 0, []byte(`{"a":1}`))[:8]), cut: true},
		{name: "cut before payload", stream: bytes.NewReader(Append(nil, 0, []byte(`{"a":1}`))[:5]), cut: true},
		{name: "declared 4 GiB", stream: bytes.NewReader([]byte{0, 0xff, 0xff, 0xff, 0xff}), tooLarge: 0xffffffff},
		{name: "over the limit", stream: bytes.NewReader(Append(nil, 0, make([]byte, 201))), max: 200, tooLarge: 201},
		{name: "at the limit", stream: bytes.NewReader(Append(nil, 0, bytes.Repeat([]byte("x"), 200))), max: 200, want: []envelope{{0, string(bytes.Repeat([]byte("x"), 200))}}, wantEOF: true},
		{name: "failure in header", stream: iotest.ErrReader(broken), cutHeader: true, cutErr: broken},
		{name: "failure in payload", stream: io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 0, 9, 'a'}), iotest.ErrReader(broken)), cutErr: broken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxPayload := tt.max
			if maxPayload == 0 {
				maxPayload = 1 << 20
			}
			r := NewReader(tt.stream, maxPayload)
			var got []envelope
			var err error
			for {
				var flags byte
				var payload []byte
				if flags, payload, err = r.Next(); err != nil {
					break
				}
				got = append(got, envelope{flags, string(payload)})
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("envelopes = %q, want %q", got, tt.want)
			}
			var tl *TooLargeError
			var inc *IncompleteError
			switch {
			case tt.wantEOF:
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
			case tt.tooLarge != 0:
				if !errors.As(err, &tl) || tl.Size != tt.tooLarge || tl.Max != maxPayload {
					t.Fatalf("err = %#v, want a TooLargeError of %d", err, tt.tooLarge)
				}
			case !errors.As(err, &inc) || inc.Header != tt.cutHeader:
				t.Fatalf("err = %#v, want an IncompleteError (header %v)", err, tt.cutHeader)
			case tt.cut && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("err = %v, want the end of the stream", err)
			case tt.cutErr != nil && !errors.Is(err, tt.cutErr):
				t.Fatalf("err = %v, want %v", err, tt.cutErr)
			}
		})
	}
}

func TestErrorTexts(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&TooLargeError{Size: 300, Max: 200}, "message of 300 bytes exceeds the limit of 200"},
		{&IncompleteError{Header: true, Err: io.ErrUnexpectedEOF}, "incomplete envelope header: unexpected EOF"},
		{&IncompleteError{Size: 7, Err: io.EOF}, "incomplete envelope: promised 7 bytes: EOF"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestReaderReusesBuffer checks that a long stream of small messages does not allocate per message.
func TestReaderReusesBuffer(t *testing.T) {
	var stream bytes.Buffer
	for range 1000 {
		stream.Write(Append(nil, 0, []byte(`{"event":{"keepalive":{}}}`)))
	}
	r := NewReader(&stream, 1<<20)
	allocs := testing.AllocsPerRun(1, func() {
		for {
			if _, _, err := r.Next(); err != nil {
				return
			}
		}
	})
	if allocs > 5 {
		t.Fatalf("%v allocations for 1000 envelopes, want the buffer reused", allocs)
	}
}

// TestReaderAllocatesWithinLimit checks that a declared length over the limit allocates nothing, however large.
func TestReaderAllocatesWithinLimit(t *testing.T) {
	r := NewReader(bytes.NewReader([]byte{0, 0x7f, 0xff, 0xff, 0xff}), 1<<10)
	if _, _, err := r.Next(); err == nil || cap(r.buf) != 0 {
		t.Fatalf("err = %v, buffer of %d bytes: want an error and no buffer", err, cap(r.buf))
	}
}

func TestEndStream(t *testing.T) {
	for _, tt := range []struct {
		rerr *Error
		want string
	}{
		{nil, `{}`},
		{&Error{Code: "not_found", Message: "file '/x' <missing>"}, `{"error":{"code":"not_found","message":"file '/x' \u003cmissing\u003e"}}`},
		{&Error{Code: "canceled"}, `{"error":{"code":"canceled"}}`},
	} {
		got := MarshalEndStream(tt.rerr)
		if string(got) != tt.want {
			t.Errorf("MarshalEndStream(%+v) = %s, want %s", tt.rerr, got, tt.want)
		}
		var end EndStream
		if err := json.Unmarshal(got, &end); err != nil {
			t.Fatalf("unmarshal %s: %v", got, err)
		}
		if (end.Error == nil) != (tt.rerr == nil) || (end.Error != nil && *end.Error != *tt.rerr) {
			t.Errorf("round trip of %+v = %+v", tt.rerr, end.Error)
		}
	}
	var end EndStream
	if err := json.Unmarshal([]byte(`{"metadata":{"k":["v"]}}`), &end); err != nil || end.Error != nil || end.Metadata["k"][0] != "v" {
		t.Fatalf("metadata end = %+v, %v", end, err)
	}
}

func TestCodeStatus(t *testing.T) {
	want := map[string]int{
		"canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504, "not_found": 404,
		"already_exists": 409, "permission_denied": 403, "resource_exhausted": 429, "failed_precondition": 400,
		"aborted": 409, "out_of_range": 400, "unimplemented": 501, "internal": 500, "unavailable": 503,
		"data_loss": 500, "unauthenticated": 401, "made_up": 500, "": 500,
	}
	for code, status := range want {
		if got := CodeStatus(code); got != status {
			t.Errorf("CodeStatus(%q) = %d, want %d", code, got, status)
		}
	}
	if http.StatusText(CodeStatus("not_found")) != "Not Found" {
		t.Fatal("not_found is not 404")
	}
}
