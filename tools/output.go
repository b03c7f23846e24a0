package tools

import (
	"bytes"
	"io"
	"os"
	"unicode/utf8"
)

// capture keeps one output stream of a command within a byte budget. While the stream fits it is kept whole;
// beyond that only its head and its tail stay in memory, and the whole stream goes to a host spool file so that
// it can be saved in the sandbox for the model to read. Memory stays bounded by about twice the budget. A budget
// of the result limit keeps all the result can show: every byte of output costs at least two of the result.
type capture struct {
	budget, headMax, tailMax int

	mem      []byte // the whole stream while it fits the budget
	head     []byte // after overflow: the first headMax bytes
	tail     []byte // after overflow: recent bytes; the last tailMax of them are the tail
	total    int64
	newlines int64
	last     byte
	overflow bool
	costMemo int // the cost of mem, plus one; 0 when not known since the last write

	spoolDir string
	spool    *os.File
	spoolErr error
}

func newCapture(budget int, spoolDir string) *capture {
	budget = max(budget, 2)
	return &capture{budget: budget, headMax: budget / 2, tailMax: budget - budget/2, spoolDir: spoolDir}
}

func (c *capture) write(p []byte) {
	if len(p) == 0 {
		return
	}
	c.costMemo = 0
	c.total += int64(len(p))
	c.newlines += int64(bytes.Count(p, []byte{'\n'}))
	c.last = p[len(p)-1]
	if !c.overflow {
		if len(c.mem)+len(p) <= c.budget {
			c.mem = append(c.mem, p...)
			return
		}
		c.overflow = true
		all := append(c.mem, p...)
		c.mem = nil
		c.toSpool(all)
		c.head = bytes.Clone(all[:c.headMax])
		c.tail = bytes.Clone(all[max(c.headMax, len(all)-c.tailMax):])
		return
	}
	c.toSpool(p)
	if len(p) >= c.tailMax {
		c.tail = append(c.tail[:0], p[len(p)-c.tailMax:]...)
		return
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailMax {
		n := copy(c.tail, c.tail[len(c.tail)-c.tailMax:])
		c.tail = c.tail[:n]
	}
}

func (c *capture) toSpool(p []byte) {
	if c.spoolErr != nil {
		return
	}
	if c.spool == nil {
		c.spool, c.spoolErr = os.CreateTemp(c.spoolDir, "e2b-mcp-exec-*.out")
		if c.spoolErr != nil {
			return
		}
	}
	if _, err := c.spool.Write(p); err != nil {
		c.spoolErr = err
	}
}

// overflowed reports whether the stream outgrew the budget: only its head and tail are in memory.
func (c *capture) overflowed() bool { return c.overflow }

// lines counts the stream's lines; a last line without a newline counts too.
func (c *capture) lines() int64 {
	if c.total > 0 && c.last != '\n' {
		return c.newlines + 1
	}
	return c.newlines
}

// cost is what the whole stream costs in the result; -1 when it is no longer all in memory.
func (c *capture) cost() int {
	if c.overflow {
		return -1
	}
	if c.costMemo == 0 {
		c.costMemo = fieldCost(c.mem) + 1
	}
	return c.costMemo - 1
}

// fits reports whether the whole stream fits room bytes of the result.
func (c *capture) fits(room int) bool {
	n := c.cost()
	return n >= 0 && n <= room
}

// text is the stream as the result shows it within room bytes of the result (see fieldCost): whole, or head and
// tail around a marker line saying what is left out. cut says which.
func (c *capture) text(room int) (s string, cut bool) {
	if c.fits(room) {
		return string(c.mem), false
	}
	if !c.overflow {
		return headAndTail(c.mem, c.mem, c.total, c.newlines, room)
	}
	return headAndTail(c.head, c.tail[max(0, len(c.tail)-c.tailMax):], c.total, c.newlines, room)
}

// spooled returns the whole stream from the start, for saving; the caller must not write afterwards.
func (c *capture) spooled() (io.Reader, error) {
	if c.spoolErr != nil {
		return nil, c.spoolErr
	}
	if c.spool == nil {
		return bytes.NewReader(c.mem), nil
	}
	if _, err := c.spool.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return c.spool, nil
}

// close removes the spool file.
func (c *capture) close() {
	if c.spool != nil {
		name := c.spool.Name()
		c.spool.Close()
		os.Remove(name)
		c.spool = nil
	}
}

// trimPartialRuneEnd drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRuneEnd(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// trimPartialRuneStart drops continuation bytes at the start of b (the rest of a sequence cut off before it).
func trimPartialRuneStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
