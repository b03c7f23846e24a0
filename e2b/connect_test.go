package e2b

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/internal/connectframe"
)

func frame(flags byte, payload string) []byte {
	return connectframe.Append(nil, flags, []byte(payload))
}

func TestReadConnectStream(t *testing.T) {
	big := strings.Repeat("x", 300)
	tests := []struct {
		name     string
		stream   []byte
		max      int
		wantMsgs []string
		wantErr  string // substring; empty: success
		cut      bool   // errors.Is(err, errStreamCut)
		endErr   *connectframe.Error
	}{
		{
			name:     "messages then end",
			stream:   bytes.Join([][]byte{frame(0, `{"a":1}`), frame(0, `{"b":2}`), frame(2, `{}`)}, nil),
			wantMsgs: []string{`{"a":1}`, `{"b":2}`},
		},
		{
			name:     "end with error",
			stream:   bytes.Join([][]byte{frame(0, `{"a":1}`), frame(2, `{"error":{"code":"invalid_argument","message":"cwd '/nope' does not exist"}}`)}, nil),
			wantMsgs: []string{`{"a":1}`},
			endErr:   &connectframe.Error{Code: "invalid_argument", Message: "cwd '/nope' does not exist"},
		},
		{name: "empty body", stream: nil, cut: true, wantErr: "stream cut"},
		{name: "no end message", stream: frame(0, `{"a":1}`), wantMsgs: []string{`{"a":1}`}, cut: true, wantErr: "stream cut"},
		{name: "cut inside header", stream: append(frame(0, `{}`), 0, 0), wantMsgs: []string{`{}`}, cut: true, wantErr: "stream cut"},
		{name: "cut inside payload", stream: frame(0, `{"a":1}`)[:8], cut: true, wantErr: "stream cut"},
		{name: "oversized length", stream: []byte{0, 0xff, 0xff, 0xff, 0xff}, wantErr: "exceeds the limit"},
		{name: "over the limit", stream: frame(0, big), max: 200, wantErr: "exceeds the limit"},
		{name: "compressed", stream: frame(1, `xx`), wantErr: "compressed"},
		{name: "malformed end", stream: frame(2, `{`), wantErr: "malformed end-of-stream"},
		{name: "end with metadata", stream: frame(2, `{"metadata":{"k":["v"]}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxMsg := tt.max
			if maxMsg == 0 {
				maxMsg = connectMaxMessage
			}
			var msgs []string
			end, err := readConnectStream(bytes.NewReader(tt.stream), maxMsg, func(b []byte) error {
				msgs = append(msgs, string(b))
				return nil
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if errors.Is(err, errStreamCut) != tt.cut {
					t.Fatalf("errors.Is(err, errStreamCut) = %v, want %v", !tt.cut, tt.cut)
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if strings.Join(msgs, "|") != strings.Join(tt.wantMsgs, "|") {
				t.Fatalf("messages = %q, want %q", msgs, tt.wantMsgs)
			}
			if tt.wantErr == "" {
				switch {
				case tt.endErr == nil && end.Error != nil:
					t.Fatalf("end error = %+v, want none", end.Error)
				case tt.endErr != nil && (end.Error == nil || *end.Error != *tt.endErr):
					t.Fatalf("end error = %+v, want %+v", end.Error, tt.endErr)
				}
			}
		})
	}
}

func TestReadConnectStreamStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	stream := bytes.Join([][]byte{frame(0, `1`), frame(0, `2`), frame(2, `{}`)}, nil)
	n := 0
	_, err := readConnectStream(bytes.NewReader(stream), connectMaxMessage, func([]byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("err = %v after %d messages, want stop after 1", err, n)
	}
}

func TestEventDecoderFastPath(t *testing.T) {
	var dec eventDecoder
	msgs := map[string]ProcessEvent{
		`{"event":{"data":{"stdout":"aGVsbG8K"}}}`:       {Kind: EventStdout, Data: []byte("hello\n")},
		`{"event":{"data":{"stderr":"ZXJy"}}}`:           {Kind: EventStderr, Data: []byte("err")},
		`{"event":{"data":{"pty":"eA=="}}}`:              {Kind: EventPTY, Data: []byte("x")},
		`{"event":{"data":{"stdout":"aGk"}}}`:            {Kind: EventStdout, Data: []byte("hi")}, // unpadded: slow path
		`{"event": {"data": {"stdout": "aGk="}}}`:        {Kind: EventStdout, Data: []byte("hi")}, // spaced: slow path
		`{"event":{"data":{"stdout":"\u0061Gk="}}}`:      {Kind: EventStdout, Data: []byte("hi")}, // escaped: slow path
		`{"event":{"data":{"stdout":""}}}`:               {Kind: EventStdout, Data: []byte{}},     // empty chunk
		`{"event":{"end":{"exited":true,"status":"x"}}}`: {Kind: EventEnd, End: &ProcessEnd{Exited: true, Status: "x"}},
	}
	for msg, want := range msgs {
		got, ok, err := dec.decode([]byte(msg))
		if err != nil || !ok || got.Kind != want.Kind || string(got.Data) != string(want.Data) || (want.End != nil && *got.End != *want.End) {
			t.Errorf("decode(%s) = %+v, %v, %v", msg, got, ok, err)
		}
	}
	// Output shares one buffer: a caller must copy what it keeps.
	a, _, _ := dec.decode([]byte(`{"event":{"data":{"stdout":"YWFh"}}}`))
	_, _, _ = dec.decode([]byte(`{"event":{"data":{"stdout":"YmJi"}}}`))
	if string(a.Data) != "bbb" {
		t.Errorf("the output buffer is not reused: %q", a.Data)
	}
}

func TestDecodeProcessEvent(t *testing.T) {
	tests := []struct {
		msg  string
		want ProcessEvent
		ok   bool
	}{
		{`{"event":{"start":{"pid":512}}}`, ProcessEvent{Kind: EventStart, PID: 512}, true},
		{`{"event":{"start":{"pid":"512"}}}`, ProcessEvent{Kind: EventStart, PID: 512}, true},
		{`{"event":{"data":{"stdout":"aGVsbG8K"}}}`, ProcessEvent{Kind: EventStdout, Data: []byte("hello\n")}, true},
		{`{"event":{"data":{"stderr":"ZXJy"}}}`, ProcessEvent{Kind: EventStderr, Data: []byte("err")}, true},
		{`{"event":{"data":{"pty":"eA=="}}}`, ProcessEvent{Kind: EventPTY, Data: []byte("x")}, true},
		{`{"event":{"keepalive":{}}}`, ProcessEvent{Kind: EventKeepalive}, true},
		{`{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}`,
			ProcessEvent{Kind: EventEnd, End: &ProcessEnd{ExitCode: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}}, true},
		{`{"event":{"end":{"exited":true,"status":"exit status 0"}}}`,
			ProcessEvent{Kind: EventEnd, End: &ProcessEnd{Exited: true, Status: "exit status 0"}}, true},
		{`{"event":{"end":{"exit_code":-1,"status":"signal: killed","error":"signal: killed"}}}`,
			ProcessEvent{Kind: EventEnd, End: &ProcessEnd{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}}, true},
		{`{"event":{"somethingNew":{}}}`, ProcessEvent{}, false},
		{`{}`, ProcessEvent{}, false},
	}
	for _, tt := range tests {
		got, ok, err := decodeProcessEvent([]byte(tt.msg))
		if err != nil || ok != tt.ok || got.Kind != tt.want.Kind || got.PID != tt.want.PID || string(got.Data) != string(tt.want.Data) ||
			(got.End == nil) != (tt.want.End == nil) || (got.End != nil && *got.End != *tt.want.End) {
			t.Errorf("decodeProcessEvent(%s) = %+v, %v, %v; want %+v, %v", tt.msg, got, ok, err, tt.want, tt.ok)
		}
	}
	for _, bad := range []string{`{"event":{"start":{"pid":-1}}}`, `{"event":{"data":{"stdout":"!"}}}`, `[`} {
		if _, _, err := decodeProcessEvent([]byte(bad)); err == nil {
			t.Errorf("decodeProcessEvent(%s) accepted", bad)
		}
	}
}

// FuzzEnvelope feeds arbitrary bytes to the envelope reader: it must never panic, never return a payload larger
// than its limit, never allocate more than the limit for one message however large the declared length, and
// every failure must read as a cut stream or a protocol error.
func FuzzEnvelope(f *testing.F) {
	f.Add(frame(0, `{"event":{"start":{"pid":1}}}`))
	f.Add(frame(2, `{}`))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 10
		er := connectframe.NewReader(bytes.NewReader(data), limit)
		for range 64 {
			_, payload, err := er.Next()
			if err != nil {
				if err := streamReadError(err); err != errStreamCut {
					var perr *protocolError
					if !errors.As(err, &perr) {
						t.Fatalf("read error %v is neither a cut stream nor a protocol error", err)
					}
				}
				return
			}
			// The payload is a slice of the reader's one buffer: its capacity is what the reader allocated.
			if len(payload) > limit || cap(payload) > limit {
				t.Fatalf("payload of %d bytes in a buffer of %d, over the limit %d", len(payload), cap(payload), limit)
			}
		}
	})
}

// FuzzStream feeds arbitrary streams through the whole decoding of a process stream: envelopes, the
// end-of-stream message and process events. It must never panic and must end with an end or an error.
func FuzzStream(f *testing.F) {
	f.Add(bytes.Join([][]byte{
		frame(0, `{"event":{"start":{"pid":512}}}`),
		frame(0, `{"event":{"data":{"stdout":"aGVsbG8K"}}}`),
		frame(0, `{"event":{"end":{"exitCode":1,"exited":true,"status":"exit status 1","error":"exit status 1"}}}`),
		frame(2, `{}`),
	}, nil))
	f.Add(frame(2, `{"error":{"code":"not_found","message":"x"}}`))
	f.Add(frame(0, `{"event":{"data":{"stdout":"!!"}}}`))
	f.Add(frame(0, `{"event":{"data":{"stderr":"aGk"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var events int
		var dec eventDecoder
		end, err := readConnectStream(io.LimitReader(bytes.NewReader(data), 1<<20), 1<<12, func(msg []byte) error {
			if len(msg) > 1<<12 {
				t.Fatalf("message of %d bytes over the limit", len(msg))
			}
			ev, ok, err := dec.decode(msg)
			slow, slowOK, slowErr := decodeProcessEvent(msg)
			if slowErr == nil && (err != nil || ok != slowOK || ev.Kind != slow.Kind || !bytes.Equal(ev.Data, slow.Data)) {
				t.Fatalf("fast path %+v %v %v, slow path %+v %v", ev, ok, err, slow, slowOK)
			}
			if err != nil {
				return err
			}
			if ok {
				events++
				if ev.Kind < EventStart || ev.Kind > EventEnd || (ev.Kind == EventEnd) != (ev.End != nil) {
					t.Fatalf("inconsistent event %+v", ev)
				}
			}
			return nil
		})
		if (end == nil) == (err == nil) {
			t.Fatalf("end = %v, err = %v: want exactly one", end, err)
		}
	})
}
