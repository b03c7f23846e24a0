package ssetest

import (
	"slices"
	"testing"
)

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		want                    []string
	}{
		{"json body", "application/json", `{"id":1}`, []string{`{"id":1}`}},
		{"event stream", "text/event-stream; charset=utf-8",
			"event: message\ndata: {\"method\":\"notifications/progress\"}\n\nid: 7\ndata: {\"id\":1}\n\n",
			[]string{`{"method":"notifications/progress"}`, `{"id":1}`}},
		{"empty stream", "text/event-stream", ": keep-alive\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range Messages(tc.contentType, []byte(tc.body)) {
				got = append(got, string(m))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Messages = %q, want %q", got, tc.want)
			}
			last := Response(tc.contentType, []byte(tc.body))
			if len(tc.want) == 0 {
				if last != nil {
					t.Fatalf("Response of a stream without data = %q, want nil", last)
				}
			} else if string(last) != tc.want[len(tc.want)-1] {
				t.Fatalf("Response = %q, want the last message %q", last, tc.want[len(tc.want)-1])
			}
		})
	}
}
