package synclink

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// hugeList is a reader of a list of as many 4 KB paths as the default limits allow entries: 200 MB, made as it is
// read, so that what a reader of it takes is what it holds.
func hugeList() io.Reader {
	name := strings.Repeat("p", workspace.MaxNameBytes-1) + "\x00"
	rs := make([]io.Reader, workspace.DefaultLimits.MaxEntries)
	for i := range rs {
		rs[i] = strings.NewReader(name)
	}
	return io.MultiReader(rs...)
}

// A fetch's list of 200 MB is refused (413) once it passes the bound of a list on its total, having read no more
// than that bound and held no more than the paths within it, whether its length is known or not.
func TestAFetchListIsReadNoFurtherThanItsBound(t *testing.T) {
	limits := workspace.DefaultLimits
	for _, known := range []bool{false, true} {
		body := &workspace.CountingReader{R: hugeList()}
		r := httptest.NewRequest(http.MethodPost, Path+"/"+stepFetch, body)
		r.ContentLength = -1
		if known {
			r.ContentLength = int64(limits.MaxEntries) * workspace.MaxNameBytes
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readPaths(httptest.NewRecorder(), r, limits)
		runtime.ReadMemStats(&after)
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) || tooBig.Limit != limits.MaxPathListBytes() {
			t.Fatalf("a fetch list of 200 MB (length known: %v): %v, want it over the %d bytes of a list", known, err,
				limits.MaxPathListBytes())
		}
		read, held := body.N, int64(after.TotalAlloc-before.TotalAlloc)
		want := limits.MaxPathListBytes() + 64<<10
		if read > want || held > 2*want+1<<20 {
			t.Errorf("a refused fetch list (length known: %v) read %d bytes and allocated %d, want at most %d read and "+
				"%d allocated", known, read, held, want, 2*want+1<<20)
		}
	}
}

// A list of more paths than the limits' entries, or a path longer than a path may be, is refused.
func TestAFetchListsPathsAreBounded(t *testing.T) {
	limits := workspace.Limits{MaxEntries: 2, MaxFileBytes: 1, MaxTotalBytes: 1}
	for list, want := range map[string]string{
		"a\x00b\x00c": "more than the 2 paths a sync takes",
		strings.Repeat("a", workspace.MaxNameBytes+1): "longer than 4096 bytes",
		"a\x00../b": "not a clean path",
	} {
		limits.MaxEntries = max(2, len(list)/workspace.MaxNameBytes*256+2) // the list within the total
		r := httptest.NewRequest(http.MethodPost, Path+"/"+stepFetch, strings.NewReader(list))
		if _, err := readPaths(httptest.NewRecorder(), r, limits); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a fetch list of %.40q: %v, want %q", list, err, want)
		}
	}
}
