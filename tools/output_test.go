package tools

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// feed writes s to c in chunks of random sizes, as envd's stream delivers them.
func feed(c *capture, s string, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	b := []byte(s)
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(700))
		c.write(b[:n])
		b = b[n:]
	}
}

func TestCaptureWithinBudget(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "x", "one\ntwo\n", "no newline at end", strings.Repeat("a", 4096)} {
		c := newCapture(4096, t.TempDir())
		feed(c, s, 1)
		if got, cut := c.text(fieldCost([]byte(s))); c.overflowed() || cut || got != s {
			t.Fatalf("%q came back as %q (overflowed %v, cut %v)", s, got, c.overflowed(), cut)
		}
		wantLines := strings.Count(s, "\n")
		if s != "" && !strings.HasSuffix(s, "\n") {
			wantLines++
		}
		if c.lines() != int64(wantLines) {
			t.Errorf("%q: %d lines, want %d", s, c.lines(), wantLines)
		}
		r, err := c.spooled()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(r); string(b) != s {
			t.Errorf("spooled %q", b)
		}
		c.close()
	}
}

func TestCaptureHeadAndTail(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"lines":         seqOutput(20000),
		"one long line": strings.Repeat("0123456789", 5000),
		"multibyte":     strings.Repeat("żółw 🐢 ", 4000),
		"long lines":    strings.Repeat(strings.Repeat("y", 3000)+"\n", 20),
	}
	for name, s := range cases {
		for seed := range uint64(3) {
			dir := t.TempDir()
			c := newCapture(2048, dir)
			feed(c, s, seed)
			got, cut := c.text(4096)
			if !c.overflowed() || !cut {
				t.Fatalf("%s: not cut", name)
			}
			if n := fieldCost([]byte(got)); n > 4096 {
				t.Errorf("%s: costs %d bytes of the result, over the room of 4096", name, n)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%s: a cut split a UTF-8 sequence", name)
			}
			m := markerRE.FindStringSubmatchIndex(got)
			if m == nil {
				t.Fatalf("%s: no marker in %q", name, got)
			}
			head, tail := got[:m[0]], got[m[1]:]
			if strings.HasSuffix(s[:len(head)+1], "\n") {
				head += "\n" // the marker's newline was the head's own
			}
			if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
				t.Fatalf("%s: not a head and a tail: %q ... %q", name, head[:min(20, len(head))], tail)
			}
			if len(head) < 512 || len(tail) < 512 {
				t.Errorf("%s: head %d, tail %d bytes: too little kept", name, len(head), len(tail))
			}
			if c.lines() != int64(strings.Count(s, "\n")+map[bool]int{true: 0, false: 1}[strings.HasSuffix(s, "\n")]) {
				t.Errorf("%s: %d lines", name, c.lines())
			}
			r, err := c.spooled()
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := io.ReadAll(r)
			if string(whole) != s {
				t.Fatalf("%s: the spool holds %d bytes, want %d", name, len(whole), len(s))
			}
			c.close()
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("%s: spool file left behind", name)
			}
		}
	}
}

func TestIsBinary(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      []byte
		partial bool
		want    bool
	}{
		{[]byte("plain text\n"), false, false},
		{[]byte("nul\x00byte"), false, true},
		{[]byte{0xff, 0xfe, 'a'}, false, true},
		{[]byte("cut é")[:5], true, false}, // the sample ends inside a character that goes on
		{[]byte("cut é")[:5], false, true}, // ...but the file ends there: broken text
		{[]byte{}, false, false},
	} {
		if got := isBinary(c.in, c.partial); got != c.want {
			t.Errorf("isBinary(%q, %v) = %v", c.in, c.partial, got)
		}
	}
}

// BenchmarkCapture: memory stays bounded by the budget however much a command prints (compare B/op across sizes).
func BenchmarkCapture(b *testing.B) {
	chunk := bytes.Repeat([]byte("some build output line\n"), 1400) // ~32 KiB, envd's chunk size
	for _, chunks := range []int{64, 256, 1024} {
		b.Run(strconv.Itoa(chunks*len(chunk)>>20)+"MiB", func(b *testing.B) {
			dir := b.TempDir()
			b.ReportAllocs()
			b.SetBytes(int64(len(chunk) * chunks))
			for b.Loop() {
				c := newCapture(DefaultResultLimit, dir)
				for range chunks {
					c.write(chunk)
				}
				_, _ = c.text(DefaultResultLimit)
				c.close()
			}
		})
	}
}

// A stream many times the budget is held in about twice the budget: the tail buffer is trimmed as it grows, and
// the head and tail shown are the stream's first and last bytes.
func TestCaptureMemoryBoundedOnLongStream(t *testing.T) {
	t.Parallel()
	const budget = 4096
	c := newCapture(budget, t.TempDir())
	defer c.close()
	var last []byte
	peak := 0
	for i := range 256 * budget / 64 {
		line := fmt.Appendf(nil, "%063d\n", i)
		c.write(line)
		last = line
		peak = max(peak, cap(c.mem)+cap(c.head)+cap(c.tail))
	}
	if !c.overflowed() || c.total != 256*budget {
		t.Fatalf("overflowed %v, total %d", c.overflowed(), c.total)
	}
	if peak > 3*budget {
		t.Fatalf("a stream of %d bytes held up to %d bytes in memory, want at most %d (about twice the budget of %d)", c.total, peak, 3*budget, budget)
	}
	text, _ := c.text(2 * budget)
	if !strings.HasPrefix(text, fmt.Sprintf("%063d\n", 0)) || !strings.HasSuffix(text, string(last)) || fieldCost([]byte(text)) > 2*budget {
		t.Fatalf("head and tail of the long stream: %d bytes, starts %q, ends %q", len(text), text[:64], text[len(text)-64:])
	}
}
