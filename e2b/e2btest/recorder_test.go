package e2btest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRecorder(t *testing.T) {
	s := newTestServer(t)
	create(t, s)
	call(t, s, "GET", "/v2/sandboxes?metadata=a%3Db&state=running,paused", map[string]string{"User-Agent": "ua/1"}, "")
	call(t, s, "GET", "/health", map[string]string{"E2b-Sandbox-Id": "zzz"}, "")
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if r := reqs[0]; r.Method != "POST" || r.Path != "/sandboxes" || string(r.Body) != `{"templateID":"base"}` || r.Header.Get("X-API-Key") != testKey {
		t.Fatalf("first %+v", r)
	}
	if r := reqs[1]; r.RawQuery != "metadata=a%3Db&state=running,paused" || r.Header.Get("User-Agent") != "ua/1" || r.Body != nil {
		t.Fatalf("second %+v", r)
	}
	if r := reqs[2]; r.Header.Get("E2b-Sandbox-Id") != "zzz" || r.Time.Before(reqs[1].Time) {
		t.Fatalf("third %+v", r)
	}
	s.ResetRequests()
	if len(s.Requests()) != 0 {
		t.Fatal("reset")
	}
}

func TestRecorderClipsFilesBodies(t *testing.T) {
	rc := newRecorder()
	big := bytes.Repeat([]byte("x"), FilesBodyLimit+1000)
	req, _ := http.NewRequest("POST", "http://h/files?path=/a", bytes.NewReader(big))
	rc.record(req)
	got, err := io.ReadAll(req.Body)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("handler read %d bytes, %v", len(got), err)
	}
	r := rc.requests()[0]
	if len(r.Body) != FilesBodyLimit || !r.Clipped {
		t.Fatalf("recorded %d clipped=%v", len(r.Body), r.Clipped)
	}
	// Other bodies are kept whole, before the handler reads them, and still reach the handler.
	req, _ = http.NewRequest("POST", "http://h/sandboxes", strings.NewReader(`{"a":1}`))
	rc.record(req)
	if string(rc.requests()[1].Body) != `{"a":1}` {
		t.Fatalf("recorded %q before the handler read it", rc.requests()[1].Body)
	}
	if got, _ := io.ReadAll(req.Body); string(got) != `{"a":1}` {
		t.Fatalf("body %q", got)
	}
	// A body of unknown length (a client stream) is recorded as it is read, so that recording never waits for it.
	pr, pw := io.Pipe()
	req, _ = http.NewRequest("POST", "http://h/process.Process/StreamInput", pr)
	req.ContentLength = -1
	rc.record(req) // must not block on the open pipe
	go func() { _, _ = pw.Write([]byte("frame")); _ = pw.Close() }()
	if got, _ := io.ReadAll(req.Body); string(got) != "frame" || string(rc.requests()[2].Body) != "frame" {
		t.Fatalf("stream %q, recorded %q", got, rc.requests()[2].Body)
	}
}
