package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func TestQuoting(t *testing.T) {
	tests := []struct{ fn, in, want string }{
		{"quote/", "a b/c~d.e_f-g", "a%20b/c~d.e_f-g"},
		{"quote/", "é&=+%", "%C3%A9%26%3D%2B%25"},
		{"quote", "team/snap:default", "team%2Fsnap%3Adefault"},
		{"plus", "a b/%", "a+b%2F%25"},
		{"httpx", "k=a%20b&c", "k%3Da%20b%26c"},
		{"httpx", "100%", "100%25"},
		{"httpx", "%zz", "%25zz"},
	}
	for _, tt := range tests {
		var got string
		switch tt.fn {
		case "quote/":
			got = pyQuote(tt.in, "/")
		case "quote":
			got = pyQuote(tt.in, "")
		case "plus":
			got = pyQuotePlus(tt.in)
		case "httpx":
			got = httpxQuote(tt.in)
		}
		if got != tt.want {
			t.Errorf("%s(%q) = %q, want %q", tt.fn, tt.in, got, tt.want)
		}
	}
}

// cpServerParseFilters is E2B's server-side decoding of the metadata filter (utils.parseFilters), applied to what
// net/url hands a handler.
func cpServerParseFilters(t *testing.T, rawQuery string) map[string]string {
	t.Helper()
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	query, err := url.QueryUnescape(q.Get("metadata"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, pair := range strings.Split(query, "&") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			t.Fatalf("pair %q", pair)
		}
		k, err := url.QueryUnescape(kv[0])
		if err != nil {
			t.Fatal(err)
		}
		v, err := url.QueryUnescape(kv[1])
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

func TestMetadataQueryRoundTrip(t *testing.T) {
	if got := metadataQuery(map[string]string{"user": "abc", "app": "prod"}); got != "app=prod&user=abc" {
		t.Fatalf("simple: %q", got)
	}
	md := map[string]string{
		RequestIDMetadataKey: "0a1b2c",
		"e2b-mcp.title":      "My sandbox / v2 ~ (test) é 100%",
		"path":               "/home/user",
		"empty":              "",
		"owner":              "alice+ci@example.com",
		"tricky":             "a=b&c=d %41 +",
	}
	raw := listQuery(ListQuery{Metadata: md}, "")
	got := cpServerParseFilters(t, raw)
	if len(got) != len(md) {
		t.Fatalf("decoded %v", got)
	}
	for k, v := range md {
		if got[k] != v {
			t.Errorf("%q: %q, want %q", k, got[k], v)
		}
	}
}

func TestListQuery(t *testing.T) {
	got := listQuery(ListQuery{Metadata: map[string]string{"a": "1"}, States: []string{"running", "paused"},
		Template: "base", Order: "asc", PageSize: 20}, "MjAyNi0wMS0wMVQwMDowMDowMFpfX2k=")
	want := "metadata=a%3D1&state=running,paused&template=base&order=asc&limit=20&nextToken=MjAyNi0wMS0wMVQwMDowMDowMFpfX2k%3D"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := listQuery(ListQuery{}, ""); got != "" {
		t.Fatalf("empty: %q", got)
	}
}

func TestClipText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<html><head><title>502 Bad Gateway</title></head><body>x</body></html>", "502 Bad Gateway"},
		{"<p>upstream\n\n  connect error</p>", "upstream connect error"},
		{"plain", "plain"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := clipText([]byte(tt.in)); got != tt.want {
			t.Errorf("%q: %q", tt.in, got)
		}
	}
	long := strings.Repeat("é", 300)
	got := clipText([]byte(long))
	if !strings.HasSuffix(got, "…") || len(got) > 204 || !strings.HasPrefix(got, "éé") {
		t.Fatalf("clipped %q (%d bytes)", got, len(got))
	}
}

func TestCheckSandboxID(t *testing.T) {
	c := cpClient(t, "http://127.0.0.1:1")
	for in, want := range map[string]string{"abc123": "abc123", "abc123-6532622b": "abc123"} {
		if got, err := c.checkSandboxID("op", in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	long := strings.Repeat("A", 500)
	_, err := c.checkSandboxID("op", long)
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("long ID error %v", err)
	}
}

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, cfg := range []Config{{APIURL: "api.e2b.app"}, {SandboxURL: "ftp://x"}} {
		if _, err := NewClient(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	c, err := NewClient(Config{APIKey: cpKey})
	if err != nil || c.cfg.APIURL != "https://api.e2b.app" || c.Domain() != "e2b.app" || c.cfg.UserAgent != DefaultUserAgent {
		t.Fatalf("defaults %+v %v", c.cfg, err)
	}
}

func TestCreateLookupFailureDoesNotRecreate(t *testing.T) {
	var posts, lists atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			posts.Add(1)
			w.WriteHeader(502)
			return
		}
		lists.Add(1)
		w.WriteHeader(500)
		fmt.Fprint(w, `{"code":500,"message":"Error getting paused sandboxes"}`)
	}))
	defer ts.Close()
	_, err := cpClient(t, ts.URL).CreateSandbox(context.Background(), NewSandbox{TemplateID: "base"})
	if err == nil || !strings.Contains(err.Error(), "looking for the sandbox it may have created failed too") ||
		!strings.Contains(err.Error(), "Error getting paused sandboxes") {
		t.Fatalf("%v", err)
	}
	var ae *APIError
	if !cpAsAPIError(err, &ae) || ae.Status != 502 {
		t.Fatalf("the create's own error is not kept: %v", err)
	}
	if posts.Load() != 1 || lists.Load() != 1 {
		t.Fatalf("%d creates, %d lookups", posts.Load(), lists.Load())
	}
}

func cpAsAPIError(err error, target **APIError) bool { return errors.As(err, target) }
