package workspace

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// A deletion list as long as the limits allow entry by entry (50,000 names of 4 KB: 200 MB) is refused from its
// header, read no further, rather than held whole by the server: a list is bounded on its total, a few hundred
// bytes a path on average, not by the longest path times the most entries.
func TestReceiveTarRefusesAHugeDeletionListUnread(t *testing.T) {
	limits := DefaultLimits
	name := strings.Repeat("d", MaxNameBytes-1) + "\x00"
	size := int64(limits.MaxEntries)*int64(len(name)) - 1
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: partDeletes, Typeflag: tar.TypeReg, Size: size, Format: tar.FormatPAX,
			PAXRecords: map[string]string{partRecord: partDeletes}})
		for left := size; err == nil && left > 0; left -= int64(len(name)) {
			_, err = tw.Write([]byte(name[:min(left, int64(len(name)))]))
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	t.Cleanup(func() { pr.Close() })
	read := &CountingReader{R: pr}
	_, err := ReceiveTar(read, &bytes.Buffer{}, limits, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "deletes") {
		t.Fatalf("ReceiveTar of a %d-byte deletion list = %v, want it refused", size, err)
	}
	if read.N > 1<<20 {
		t.Errorf("ReceiveTar read %d bytes of a deletion list it refuses, want its header alone", read.N)
	}
}

// Each deleted path is at most a path's length, as each entry's is.
func TestReceiveTarRefusesADeletedPathTooLong(t *testing.T) {
	var stream bytes.Buffer
	tw := tar.NewWriter(&stream)
	writePart(t, tw, partDeletes, "ok\x00"+strings.Repeat("x", MaxNameBytes+1))
	writePart(t, tw, partManifest, "{}")
	tw.Close()
	_, err := ReceiveTar(&stream, &bytes.Buffer{}, DefaultLimits, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "longer than 4096 bytes") {
		t.Fatalf("ReceiveTar = %v, want a path too long refused", err)
	}
}

// The names a stream's entries carry are held (each is checked against the others), so they too are bounded on
// their total as a list of paths is: 50,000 directories of 4 KB names are refused long before their 200 MB are
// read.
func TestReceiveTarBoundsTheNamesItHolds(t *testing.T) {
	limits := DefaultLimits
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		for i := 0; err == nil && i < limits.MaxEntries; i++ {
			name := fmt.Sprintf("%05d%s/", i, strings.Repeat("n", MaxNameBytes-7))
			err = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX})
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	t.Cleanup(func() { pr.Close() })
	read := &CountingReader{R: pr}
	_, err := ReceiveTar(read, io.Discard, limits, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "add up to more than") {
		t.Fatalf("ReceiveTar of %d directories of 4 KB names = %v, want their names' total refused", limits.MaxEntries,
			err)
	}
	if read.N > 8*limits.MaxPathListBytes() {
		t.Errorf("ReceiveTar read %d bytes of the stream before refusing its names, want at most %d", read.N,
			8*limits.MaxPathListBytes())
	}
}
