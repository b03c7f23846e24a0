package workspace

import (
	"bytes"
	"fmt"
	"strings"
)

// contextLines is the context of a hunk, as git diff makes it.
const contextLines = 3

// maxEditDistance bounds the search for the shortest edit between two versions of a file (Myers' algorithm keeps
// a row per edit): a file changed more than this is written as all of it removed and all of it added, which git
// applies just the same.
const maxEditDistance = 1000

// splitLines cuts b into lines that keep their "\n", so that a last line without one differs from the same text
// with one, as it must in a diff.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// edit is one line of an edit script: ' ' kept, '-' removed from a, '+' added from b.
type edit struct {
	op   byte
	line string
}

// diffLines returns an edit script from a to b: the shortest one (Myers) when it is at most maxEditDistance
// edits beyond the common head and tail, else all of a removed and all of b added.
func diffLines(a, b []string) []edit {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var out []edit
	for _, l := range a[:head] {
		out = append(out, edit{' ', l})
	}
	out = append(out, myers(a[head:len(a)-tail], b[head:len(b)-tail])...)
	for _, l := range a[len(a)-tail:] {
		out = append(out, edit{' ', l})
	}
	return out
}

func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	replaceAll := func() []edit {
		out := make([]edit, 0, n+m)
		for _, l := range a {
			out = append(out, edit{'-', l})
		}
		for _, l := range b {
			out = append(out, edit{'+', l})
		}
		return out
	}
	if n == 0 || m == 0 {
		return replaceAll()
	}
	limit := min(n+m, maxEditDistance)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	found := -1
	for d := 0; d <= limit && found < 0; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 {
		return replaceAll()
	}
	// Walk back through the rows kept, from the end to the start.
	var rev []edit
	x, y := n, m
	for d := found; d > 0; d-- {
		vd := trace[d]
		k := x - y
		var prevK int
		if k == -d || (k != d && vd[off+k-1] < vd[off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := vd[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			rev = append(rev, edit{' ', a[x]})
		}
		if x == prevX {
			y--
			rev = append(rev, edit{'+', b[y]})
		} else {
			x--
			rev = append(rev, edit{'-', a[x]})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, edit{' ', a[x]})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// writeHunks writes the unified hunks that take a to b.
func writeHunks(w *bytes.Buffer, a, b []byte) {
	edits := diffLines(splitLines(a), splitLines(b))
	var changed []int
	for i, e := range edits {
		if e.op != ' ' {
			changed = append(changed, i)
		}
	}
	// aLine and bLine count the lines of a and b before each edit.
	aLine, bLine := make([]int, len(edits)+1), make([]int, len(edits)+1)
	for i, e := range edits {
		aLine[i+1], bLine[i+1] = aLine[i], bLine[i]
		if e.op != '+' {
			aLine[i+1]++
		}
		if e.op != '-' {
			bLine[i+1]++
		}
	}
	for i := 0; i < len(changed); {
		start := max(changed[i]-contextLines, 0)
		j := i
		for j+1 < len(changed) && changed[j+1]-changed[j] <= 2*contextLines {
			j++
		}
		end := min(changed[j]+contextLines+1, len(edits))
		aLen, bLen := aLine[end]-aLine[start], bLine[end]-bLine[start]
		aStart, bStart := aLine[start], bLine[start]
		if aLen > 0 {
			aStart++
		}
		if bLen > 0 {
			bStart++
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", aStart, aLen, bStart, bLen)
		for _, e := range edits[start:end] {
			w.WriteByte(e.op)
			w.WriteString(e.line)
			if !strings.HasSuffix(e.line, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = j + 1
	}
}

// isBinary says whether git would treat content as binary: a NUL in its first 8000 bytes.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}
