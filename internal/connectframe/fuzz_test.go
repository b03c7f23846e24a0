package connectframe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader reads arbitrary bytes as a stream of envelopes: no panic, no payload (nor buffer) over the limit
// however large the declared length, and every failure a clean end, a cut envelope or one over the limit. An
// envelope that Append wrote reads back as it was written.
func FuzzReader(f *testing.F) {
	f.Add(Append(Append(nil, 0, []byte(`{"event":{"start":{"pid":1}}}`)), FlagEndStream, []byte("{}")), []byte("payload"))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3}, []byte{})
	f.Add([]byte{2, 0, 0, 0}, []byte{0})
	f.Add([]byte{0, 0, 0, 0, 5, 'a'}, bytes.Repeat([]byte{'x'}, 2000))
	f.Fuzz(func(t *testing.T, data, payload []byte) {
		const limit = 1 << 10
		r := NewReader(bytes.NewReader(data), limit)
		for range 64 {
			_, p, err := r.Next()
			if err != nil {
				var tooLarge *TooLargeError
				var incomplete *IncompleteError
				if !errors.Is(err, io.EOF) && !errors.As(err, &tooLarge) && !errors.As(err, &incomplete) {
					t.Fatalf("read error %v (%T) is none of a clean end, a cut envelope or one over the limit", err, err)
				}
				break
			}
			if len(p) > limit || cap(p) > limit {
				t.Fatalf("payload of %d bytes in a buffer of %d, over the limit %d", len(p), cap(p), limit)
			}
		}

		payload = payload[:min(len(payload), limit)]
		r = NewReader(bytes.NewReader(Append(nil, FlagEndStream, payload)), limit)
		flags, p, err := r.Next()
		if err != nil || flags != FlagEndStream || !bytes.Equal(p, payload) {
			t.Fatalf("an envelope of %d bytes read back as flags %d, %d bytes, %v", len(payload), flags, len(p), err)
		}
		if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the one envelope: %v, want io.EOF", err)
		}
	})
}
