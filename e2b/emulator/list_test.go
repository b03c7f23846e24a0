package emulator

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestListV2(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	var ids []string
	for i := range 7 {
		md := map[string]string{"app": "x"}
		if i%2 == 0 {
			md["app"] = "y z/é"
		}
		sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		clk.Advance(time.Second)
	}
	if _, err := s.CreateSandbox(cpKeyB, SandboxOptions{}); err != nil {
		t.Fatal(err)
	}
	cpCall(t, s, "POST", "/sandboxes/"+ids[0]+"/pause", cpKeyA, nil)

	list := func(query string) ([]map[string]any, cpAnswer) {
		t.Helper()
		a := cpCall(t, s, "GET", "/v2/sandboxes?"+query, cpKeyA, nil)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", query, a.status, a.body)
		}
		var l []map[string]any
		a.json(t, &l)
		return l, a
	}
	all, a := list("")
	if len(all) != 7 || a.header.Get("X-Total-Running") != "6" || a.header.Get("X-Next-Token") != "" {
		t.Fatalf("default: %d sandboxes, total %q", len(all), a.header.Get("X-Total-Running"))
	}
	// Newest first.
	if all[0]["sandboxID"] != ids[6] || all[6]["sandboxID"] != ids[0] || all[6]["state"] != "paused" {
		t.Fatalf("order: %v ... %v", all[0]["sandboxID"], all[6]["sandboxID"])
	}
	if l, a := list("state=paused"); len(l) != 1 || a.header.Get("X-Total-Running") != "" {
		t.Fatalf("paused only: %d, total %q", len(l), a.header.Get("X-Total-Running"))
	}
	if l, _ := list("state=running%2Cpaused"); len(l) != 7 {
		t.Fatalf("escaped comma: %d", len(l))
	}
	if l, _ := list("state=running&state=paused"); len(l) != 7 {
		t.Fatalf("repeated state: %d", len(l))
	}
	// The metadata filter as the SDK sends it: urlencode({quote(k): quote(v)}) as one value.
	if l, a := list("metadata=app%3Dy%2520z%252F%25C3%25A9"); len(l) != 4 || a.header.Get("X-Total-Running") != "3" {
		t.Fatalf("metadata filter: %d %q", len(l), a.header.Get("X-Total-Running"))
	}
	// The same value escaped whole once more (every level decoded by the server) matches too.
	if l, _ := list("metadata=app%3Dy%252520z%25252F%2525C3%2525A9"); len(l) != 4 {
		t.Fatalf("metadata filter escaped whole: %d", len(l))
	}
	if l, _ := list("metadata=app%3Dx&state=running"); len(l) != 3 {
		t.Fatalf("metadata and state: %d", len(l))
	}
	// Paging.
	page1, a := list("limit=3")
	token := a.header.Get("X-Next-Token")
	if len(page1) != 3 || token == "" {
		t.Fatalf("page 1: %d %q", len(page1), token)
	}
	if raw, err := base64.URLEncoding.DecodeString(token); err != nil || !strings.HasSuffix(string(raw), "__"+page1[2]["sandboxID"].(string)) {
		t.Fatalf("token %q: %s %v", token, raw, err)
	}
	page2, a := list("limit=3&nextToken=" + url.QueryEscape(token))
	page3, a3 := list("limit=3&nextToken=" + url.QueryEscape(a.header.Get("X-Next-Token")))
	if len(page2) != 3 || len(page3) != 1 || a3.header.Get("X-Next-Token") != "" {
		t.Fatalf("pages %d %d", len(page2), len(page3))
	}
	var paged []any
	for _, p := range [][]map[string]any{page1, page2, page3} {
		for _, m := range p {
			paged = append(paged, m["sandboxID"])
		}
	}
	for i, m := range all {
		if paged[i] != m["sandboxID"] {
			t.Fatalf("paged order differs at %d", i)
		}
	}
	if l, _ := list("order=asc&limit=1"); l[0]["sandboxID"] != ids[0] {
		t.Fatalf("asc: %v", l[0]["sandboxID"])
	}
	if l, _ := list("limit=1000"); len(l) != 7 {
		t.Fatalf("limit clamp: %d", len(l))
	}
	for _, bad := range []string{"nextToken=%21%21", "limit=0", "state=gone", "metadata=nokeyvalue", "order=up"} {
		a := cpCall(t, s, "GET", "/v2/sandboxes?"+bad, cpKeyA, nil)
		if a.status != 400 {
			t.Errorf("%s: %d", bad, a.status)
		}
	}
	a = cpCall(t, s, "GET", "/v2/sandboxes?nextToken=%21%21", cpKeyA, nil)
	if _, msg := a.errorBody(t); msg != "Invalid next token" {
		t.Fatalf("bad token message %q", msg)
	}
	a = cpCall(t, s, "GET", "/v2/sandboxes?metadata=nokeyvalue", cpKeyA, nil)
	if _, msg := a.errorBody(t); msg != "Error parsing metadata" {
		t.Fatalf("bad metadata message %q", msg)
	}
	// The deprecated v1 listing: running only.
	var v1 []map[string]any
	cpCall(t, s, "GET", "/sandboxes", cpKeyA, nil).json(t, &v1)
	if len(v1) != 6 {
		t.Fatalf("v1: %d", len(v1))
	}
}

func TestListPagingOverLimit(t *testing.T) {
	s := newCPServer(t, Options{})
	for range 230 {
		if _, err := s.CreateSandbox(cpKeyA, SandboxOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[any]bool{}
	token, pages := "", 0
	for {
		q := ""
		if token != "" {
			q = "?nextToken=" + url.QueryEscape(token)
		}
		a := cpCall(t, s, "GET", "/v2/sandboxes"+q, cpKeyA, nil)
		var l []map[string]any
		a.json(t, &l)
		pages++
		if len(l) > 100 {
			t.Fatalf("page of %d", len(l))
		}
		for _, m := range l {
			if seen[m["sandboxID"]] {
				t.Fatalf("%v twice", m["sandboxID"])
			}
			seen[m["sandboxID"]] = true
		}
		if token = a.header.Get("X-Next-Token"); token == "" {
			break
		}
	}
	if len(seen) != 230 || pages != 3 {
		t.Fatalf("%d sandboxes in %d pages", len(seen), pages)
	}
}
