// Package browsertest is a web browser for the tests of the server's pages: it keeps the cookies a page sets,
// follows redirects, and GETs pages and submits forms as a browser does (form-encoded, with an Origin header), so
// that a test sees what a member's browser would.
package browsertest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Browser is one browser, with its own cookies. Every request fails t when it cannot be made or read, and waits
// at most 30 seconds.
type Browser struct {
	t testing.TB
	c *http.Client
}

// New is a browser with no cookies yet.
func New(t testing.TB) *Browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Browser{t: t, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// Get opens page and returns the status and the page.
func (b *Browser) Get(page string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodGet, page, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// Head asks for page's headers alone and returns the status and the headers.
func (b *Browser) Head(page string) (int, http.Header) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodHead, page, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// PostForm posts form to target as a browser submits a form, with origin as its Origin ("": none), and returns
// the status and the page.
func (b *Browser) PostForm(target, origin string, form url.Values) (int, string) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

// csrfField is a form's CSRF token as the server's pages write it.
var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// CSRF is the CSRF token of page's form, "" when it has none.
func CSRF(page string) string {
	if m := csrfField.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

func (b *Browser) do(req *http.Request) (int, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("reading %s %s: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, string(body)
}
