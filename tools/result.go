package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// The result limit bounds every tool result as the client receives it: the JSON-RPC response, with the result's
// JSON sent twice (as structuredContent and as the text content of clients that read only text) and each string
// escaped on the wire. Assistants keep only so much of a result: Claude Code about 50,000 characters inline (it
// shows the model JSON.stringify(structuredContent)), so the default stays below that with room to spare. Image
// data is not counted: an image has its own limit (Config.ImageLimitBytes) and clients pass it on as an image.
const (
	DefaultResultLimit = 40_000
	// MinResultLimit leaves room for a result's fixed fields and a useful head and tail of output.
	MinResultLimit = 4096
)

// envelopeRoom is what the JSON-RPC envelope around a result takes, kept free of the limit: about 40 bytes of
// {"jsonrpc":"2.0","id":...,"result":...} with a client's usual ID, and in the 2026 era the result's resultType
// (about 25) and the _meta naming the server that mcp-go adds to every result (about 80, and the version).
const envelopeRoom = 256

// resultSize is the size of res as the server writes it, image data left out.
func resultSize(res *mcp.CallToolResult) int {
	b, err := json.Marshal(res)
	if err != nil {
		return 0
	}
	n := len(b)
	for _, c := range res.Content {
		if ic, ok := c.(mcp.ImageContent); ok {
			n -= len(ic.Data)
		}
	}
	return n
}

// encodeResult is the answer with v both as structuredContent and, for clients that read only text, as its JSON,
// followed by any extra content (withContent), and its size as resultSize measures it. The size is worked out
// from the JSON at hand rather than by encoding the answer a second time: what the wire's encoder makes of the
// text and of structuredContent (the same JSON with <, > and & escaped) is known character by character.
func encodeResult(v any) (*mcp.CallToolResult, int) {
	var extra []mcp.Content
	if wc, ok := v.(withContent); ok {
		v, extra = wc.result, wc.extra
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Command output is full of <, > and &; escaping them would only make the text harder to read.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		res := mcp.NewToolResultError("Internal error: encoding the result: " + err.Error())
		return res, resultSize(res)
	}
	text := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	// The answer with an empty text and a one-byte structuredContent, whose size the JSON's sizes complete.
	skeleton := &mcp.CallToolResult{Content: append([]mcp.Content{mcp.NewTextContent("")}, extra...), StructuredContent: json.RawMessage("0")}
	textLen, html := wireLen(text)
	size := resultSize(skeleton) - len(`""`) - len("0") + textLen + len(text) + 5*html
	return &mcp.CallToolResult{
		Content:           append([]mcp.Content{mcp.NewTextContent(string(text))}, extra...),
		StructuredContent: v,
	}, size
}

// wireLen is the length of s as a JSON string from encoding/json, quotes included, and how many of its
// characters that encoder escapes for HTML's sake (\u003c for <, and so on).
func wireLen(s []byte) (n, html int) {
	n = 2
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			n += costs.wire[c]
			if c == '<' || c == '>' || c == '&' {
				html++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += len(`\ufffd`)
		default:
			n += size
		}
		i += size
	}
	return n, html
}

// room is what a result may take of the limit.
func (b *base) room() int { return b.cfg.ResultLimit - envelopeRoom }

// sizeOf is the size v's answer takes of the limit.
func sizeOf(v any) int {
	_, n := encodeResult(v)
	return n
}

// success answers with v, within the result limit: a result the tool could not bring within it (one that has no
// output to cut, like a list far too long) is refused with a note saying so rather than sent to be lost.
func (b *base) success(tool string, v any) *mcp.CallToolResult {
	res, n := encodeResult(v)
	if n > b.room() {
		b.log.Warn("a result over the result limit", "tool", tool, "bytes", n, "limit", b.cfg.ResultLimit)
		return b.failure(fmt.Sprintf("The result of %s is %d bytes, over this server's result limit of %d bytes "+
			"(--result-limit), so it was not sent: assistants cannot read a result that long. Ask for less at a time.",
			tool, n, b.cfg.ResultLimit))
	}
	return res
}

// failure is an error result, its text cut to its head and tail when it is over the result limit. The text is
// sent once (there is no structuredContent), so fieldCost, which counts it twice, keeps the cut well within.
func (b *base) failure(text string) *mcp.CallToolResult {
	res := mcp.NewToolResultError(text)
	if resultSize(res) <= b.room() {
		return res
	}
	s := []byte(text)
	room := b.room() - resultSize(mcp.NewToolResultError(""))
	cut, _ := headAndTail(s, s, int64(len(s)), int64(bytes.Count(s, []byte{'\n'})), room)
	return mcp.NewToolResultError(cut)
}

// costs says what one byte or character of a string field costs in the result as sent: once in the text
// content, escaped by the result's encoder and again by the wire's, and once in structuredContent, escaped by
// the wire's (which escapes <, > and & as \u003c...). It is measured from encoding/json itself, so it stays
// exact whatever the encoder's choices.
var costs = measureCosts()

type costTable struct {
	ascii     [utf8.RuneSelf]int
	wire      [utf8.RuneSelf]int // an ASCII character in a JSON string from encoding/json
	invalid   int                // a byte that is not UTF-8, sent as \ufffd
	separator int                // U+2028 and U+2029, which JSON encoders escape for JavaScript's sake
}

func measureCosts() costTable {
	unit := func(s string) int {
		var inner bytes.Buffer
		enc := json.NewEncoder(&inner)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		text := strings.TrimSuffix(inner.String(), "\n")
		text = text[1 : len(text)-1] // the quotes are the field's, not the unit's
		wireText, _ := json.Marshal(text)
		wireField, _ := json.Marshal(s)
		return len(wireText) - 2 + len(wireField) - 2
	}
	var t costTable
	for c := range utf8.RuneSelf {
		t.ascii[c] = unit(string(rune(c)))
		wire, _ := json.Marshal(string(rune(c)))
		t.wire[c] = len(wire) - 2
	}
	t.invalid = unit("\xff")
	t.separator = unit("\u2028")
	return t
}

// runeCost is the cost of the character (or invalid byte) that starts b, and its length in bytes.
func runeCost(b []byte) (cost, size int) {
	if b[0] < utf8.RuneSelf {
		return costs.ascii[b[0]], 1
	}
	r, size := utf8.DecodeRune(b)
	switch {
	case r == utf8.RuneError && size == 1:
		return costs.invalid, 1
	case r == '\u2028' || r == '\u2029':
		return costs.separator, size
	}
	return 2 * size, size
}

// fieldCost is what b costs as a string field of the result.
func fieldCost(b []byte) int {
	n := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			n += costs.ascii[b[i]]
			i++
			continue
		}
		c, size := runeCost(b[i:])
		n += c
		i += size
	}
	return n
}

// headWithin is the length of the longest start of b that costs at most room, ending on a character boundary.
func headWithin(b []byte, room int) int {
	i := 0
	for i < len(b) {
		c, size := runeCost(b[i:])
		if c > room {
			break
		}
		room -= c
		i += size
	}
	return i
}

// tailWithin is where the longest end of b that costs at most room begins, on a character boundary.
func tailWithin(b []byte, room int) int {
	j := len(b)
	for j > 0 {
		_, size := utf8.DecodeLastRune(b[:j])
		c, _ := runeCost(b[j-size : j])
		if c > room {
			break
		}
		room -= c
		j -= size
	}
	return j
}

// markerCost bounds the cost of the marker line between a head and a tail, whatever its numbers.
var markerCost = fieldCost([]byte("\n" + marker(1<<62, 1<<62)))

func marker(omittedBytes, omittedLines int64) string {
	return fmt.Sprintf("... [%d bytes / %d lines omitted] ...\n", omittedBytes, omittedLines)
}

// headAndTail shows a text of total bytes and newlines, of which head is the start and tail the end, within room:
// as much of head and tail as fits, around a marker line saying how much is left out. Cuts fall on line ends where
// a line end is near, and never inside a UTF-8 sequence. cut is false when the whole text (head being all of it)
// fits.
func headAndTail(head, tail []byte, total, newlines int64, room int) (text string, cut bool) {
	if int64(len(head)) == total && fieldCost(head) <= room {
		return string(head), false
	}
	room = max(0, room-markerCost)
	h := head[:headWithin(head, room/2)]
	if i := bytes.LastIndexByte(h, '\n'); i >= len(h)/2 {
		h = h[:i+1]
	}
	tail = trimPartialRuneStart(tail)
	t := tail[tailWithin(tail, room-fieldCost(h)):]
	if j := bytes.IndexByte(t, '\n'); j >= 0 && j < len(t)/2 {
		t = t[j+1:]
	}
	omittedBytes := total - int64(len(h)) - int64(len(t))
	omittedLines := newlines - int64(bytes.Count(h, []byte{'\n'})) - int64(bytes.Count(t, []byte{'\n'}))
	var sb strings.Builder
	sb.Grow(len(h) + len(t) + 64)
	sb.Write(h)
	if len(h) > 0 && h[len(h)-1] != '\n' {
		sb.WriteByte('\n')
	}
	sb.WriteString(marker(omittedBytes, omittedLines))
	sb.Write(t)
	return sb.String(), true
}

// listPage is the page of a list tool's items that fits in the result limit: as many as fit of those from offset
// on, and where the rest begins (0 when none is left out). page makes the tool's result of a run of items and its
// next offset, so that everything the result holds besides the items is counted. A list that fits whole costs one
// encoding, a longer one a binary search over how many fit; at least one item is given, so that paging always
// moves on (an item too large alone is refused by success like any result over the limit).
func listPage[T any](b *base, items []T, offset int, page func(items []T, next int) any) any {
	rest := items[min(offset, len(items)):]
	at := func(n int) any {
		next := 0
		if n < len(rest) {
			next = offset + n
		}
		return page(rest[:n], next)
	}
	if whole := at(len(rest)); sizeOf(whole) <= b.room() {
		return whole
	}
	// The longest run that fits is in [lo, hi): lo fits (or is the one item given at least), hi does not.
	lo, hi := min(1, len(rest)), len(rest)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if sizeOf(at(mid)) <= b.room() {
			lo = mid
		} else {
			hi = mid
		}
	}
	return at(lo)
}

// checkListOffset checks a list tool's offset argument.
func checkListOffset(offset int) error {
	if offset < 0 {
		return userErrorf("Invalid offset %d: it is how many items to skip, 0 or more.", offset)
	}
	return nil
}
