package e2b

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A host that answers with a redirect to another host must not get the API key or an envd token sent there:
// the redirect is refused (once, without a retry), and the other host sees no request at all.
func TestRedirectToAnotherHostCarriesNoSecret(t *testing.T) {
	var foreign atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreign.Add(1)
		if r.Header.Get("X-API-Key") != "" || r.Header.Get("X-Access-Token") != "" {
			t.Errorf("%s %s reached another host with a secret header", r.Method, r.URL.Path)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	var hits atomic.Int32
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()

	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: redirecting.URL, SandboxURL: redirecting.URL,
		RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Envd(SandboxConn{ID: "sbx1", EnvdVersion: "0.6.13", AccessToken: testToken})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"control plane GET": func() error { _, err := c.ListSandboxes(ctx, ListQuery{}); return err },
		"control plane POST": func() error {
			_, _, err := c.ConnectSandbox(ctx, "sbx1", 60)
			return err
		},
		"envd RPC": func() error { _, err := e.Stat(ctx, "/home/user"); return err },
		"envd download": func() error {
			r, _, err := e.Download(ctx, "/home/user/a", DownloadOptions{})
			if err == nil {
				r.Close()
			}
			return err
		},
	}
	for name, call := range calls {
		hits.Store(0)
		err := call()
		if !errors.Is(err, ErrForeignRedirect) {
			t.Errorf("%s: err = %v, want ErrForeignRedirect", name, err)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("%s: the redirecting host was asked %d times, want once (no retry)", name, n)
		}
	}
	// An upload streams its body, which net/http cannot send twice: the 307 comes back as an answer.
	if _, err := e.Upload(ctx, "/home/user/a", strings.NewReader("x")); err == nil {
		t.Error("envd upload: a redirect to another host was taken for success")
	}
	if n := foreign.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

// A redirect within the same origin is followed with the key, as before.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	})
	var key atomic.Value
	mux.HandleFunc("GET /moved", func(w http.ResponseWriter, r *http.Request) {
		key.Store(r.Header.Get("X-API-Key"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[]"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSandboxes(t.Context(), ListQuery{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := key.Load().(string); got != testAPIKey {
		t.Fatalf("the redirected request carried X-API-Key %q", got)
	}
}

// A redirect loop within the origin ends after ten redirects, and is not tried again: another attempt would loop
// the same way.
func TestRedirectLoopIsNotRetried(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c, err := NewClient(Config{APIKey: testAPIKey, APIURL: srv.URL, MaxRetries: 3, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSandbox(t.Context(), "abc")
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Fatalf("err = %v", err)
	}
	if n := asked.Load(); n != 10 {
		t.Fatalf("the server was asked %d times, want 10 (one attempt, its redirects included)", n)
	}
}
