// Package ssetest reads the body of an MCP HTTP answer in tests: streamable HTTP answers a request either with one
// JSON body or with a server-sent event stream whose data lines carry the messages (notifications first, the
// response last).
package ssetest

import "strings"

// Messages returns the JSON-RPC messages of a body answered with contentType: the body itself, or each event's
// data when it is an event stream.
func Messages(contentType string, body []byte) [][]byte {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return [][]byte{body}
	}
	var out [][]byte
	for line := range strings.SplitSeq(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, []byte(data))
		}
	}
	return out
}

// Response returns the last message of the body, the response to the request (notifications come before it), or
// nil when there is none.
func Response(contentType string, body []byte) []byte {
	msgs := Messages(contentType, body)
	if len(msgs) == 0 {
		return nil
	}
	return msgs[len(msgs)-1]
}
