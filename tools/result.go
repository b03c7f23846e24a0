package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// The result limit bounds what a model reads of a tool result. A result is sent in two copies, the text content
// (the JSON of the result, for clients that show text) and structuredContent (for clients that show only that,
// as Codex and Copilot CLI do), and a client hands its model one of them: so the limit applies to each copy on
// its own, not to their sum. It is the client's (Client.Budget, from the table in clients.go, chosen by the
// clientInfo the client sends) unless --result-limit sets one for every client. Sizes are counted in bytes of
// UTF-8, which is never fewer than the characters a client counts. Image data is not counted: an image has its
// own limit (Config.ImageLimitBytes) and clients pass it on as an image, or not at all.
const (
	// DefaultResultLimit is the budget of a client e2b-mcp does not know (unknownClient).
	DefaultResultLimit = 18_000
	// MinResultLimit leaves room for a result's fixed fields and a useful head and tail of output.
	MinResultLimit = 4096
)

// resultSize is what res takes of the limit: the longer of its copies as a model reads them, the content's text
// (a resource link as its name, URI and description, as clients show it) and structuredContent's JSON.
func resultSize(res *mcp.CallToolResult) int {
	text := contentSize(res.Content)
	if res.StructuredContent == nil {
		return text
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return text
	}
	return max(text, len(b))
}

// resourceLinkRoom is what a client adds around a resource link's name, URI and description when it shows it
// to its model ("[Resource link: NAME] URI (DESCRIPTION)").
const resourceLinkRoom = 32

// contentSize is the text a model reads of content: text, resource links, embedded text; images left out.
func contentSize(content []mcp.Content) int {
	n := 0
	for _, c := range content {
		switch c := c.(type) {
		case mcp.TextContent:
			n += len(c.Text)
		case mcp.ResourceLink:
			n += len(c.Name) + len(c.URI) + len(c.Description) + resourceLinkRoom
		case mcp.EmbeddedResource:
			if t, ok := c.Resource.(mcp.TextResourceContents); ok {
				n += len(t.URI) + len(t.Text)
			}
		}
	}
	return n
}

// encodeResult is the answer with v both as structuredContent and, for clients that read only text, as its JSON,
// followed by any content it carries (attachments), and its size as resultSize measures it. The size is worked out
// from the JSON at hand rather than by encoding the answer a second time: structuredContent is the same JSON
// with <, > and & escaped (\u003c), five bytes more each.
func encodeResult(v any) (*mcp.CallToolResult, int) {
	var extra []mcp.Content
	if a, ok := v.(attached); ok {
		extra = a.attached()
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
	html := bytes.Count(text, []byte{'<'}) + bytes.Count(text, []byte{'>'}) + bytes.Count(text, []byte{'&'})
	size := len(text) + max(contentSize(extra), 5*html)
	return &mcp.CallToolResult{
		Content:           append([]mcp.Content{mcp.NewTextContent(string(text))}, extra...),
		StructuredContent: v,
	}, size
}

// limit is the result limit of a call: --result-limit where it is set, else the calling client's budget.
func (b *base) limit(ctx context.Context) int {
	if b.cfg.ResultLimit > 0 {
		return b.cfg.ResultLimit
	}
	return clientOf(ctx).Budget
}

// sizeOf is the size v's answer takes of the limit.
func sizeOf(v any) int {
	_, n := encodeResult(v)
	return n
}

// success answers with v, within the result limit: a result the tool could not bring within it (one that has no
// output to cut, like a list far too long) is refused with a note saying so rather than sent to be lost.
func (b *base) success(ctx context.Context, tool string, v any) *mcp.CallToolResult {
	res, n := encodeResult(v)
	if clientOf(ctx).Reads == ReadsStructured && hasImage(res.Content) {
		// Such a client would hand its model structuredContent alone, the image dropped (see Tool.Images).
		res.StructuredContent = nil
	}
	if limit := b.limit(ctx); n > limit {
		b.log.Warn("a result over the result limit", "tool", tool, "bytes", n, "limit", limit)
		return b.failure(ctx, fmt.Sprintf("The result of %s is %d characters, over the result limit of %d for this "+
			"client, so it was not sent: the client would not hand it to you whole. Ask for less at a time.",
			tool, n, limit))
	}
	return res
}

func hasImage(content []mcp.Content) bool {
	for _, c := range content {
		if _, ok := c.(mcp.ImageContent); ok {
			return true
		}
	}
	return false
}

// failure is an error result, its text cut to its head and tail when it is over the result limit.
func (b *base) failure(ctx context.Context, text string) *mcp.CallToolResult {
	res := mcp.NewToolResultError(text)
	limit := b.limit(ctx)
	if resultSize(res) <= limit {
		return res
	}
	s := []byte(text)
	cut, _ := headAndTail(s, s, int64(len(s)), int64(bytes.Count(s, []byte{'\n'})), limit)
	return mcp.NewToolResultError(cut)
}

// costs says what one byte or character of a string field costs in the longer copy of a result: in the text
// content, escaped by the result's encoder, or in structuredContent, where <, > and & are escaped as \u003c....
// It is measured from encoding/json itself, so it stays exact whatever the encoder's choices.
var costs = measureCosts()

type costTable struct {
	ascii     [utf8.RuneSelf]int
	invalid   int // a byte that is not UTF-8, sent as \ufffd
	separator int // U+2028 and U+2029, which JSON encoders escape for JavaScript's sake
}

func measureCosts() costTable {
	unit := func(s string) int {
		var inner bytes.Buffer
		enc := json.NewEncoder(&inner)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		text := strings.TrimSuffix(inner.String(), "\n")
		structured, _ := json.Marshal(s)
		return max(len(text), len(structured)) - 2 // the quotes are the field's, not the unit's
	}
	var t costTable
	for c := range utf8.RuneSelf {
		t.ascii[c] = unit(string(rune(c)))
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
	return size, size
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
	// A head kept of a longer stream may end inside a character, which no cut may show.
	head = trimPartialRuneEnd(head)
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
func listPage[T, R any](ctx context.Context, b *base, items []T, offset int, page func(items []T, next int) *R) *R {
	rest := items[min(offset, len(items)):]
	at := func(n int) *R {
		next := 0
		if n < len(rest) {
			next = offset + n
		}
		return page(rest[:n], next)
	}
	if whole := at(len(rest)); sizeOf(whole) <= b.limit(ctx) {
		return whole
	}
	// The longest run that fits is in [lo, hi): lo fits (or is the one item given at least), hi does not.
	lo, hi := min(1, len(rest)), len(rest)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if sizeOf(at(mid)) <= b.limit(ctx) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return at(lo)
}

// checkListOffset checks a list tool's offset argument.

// joinWarnings combines the warnings of one call.
func joinWarnings(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}
