package synclink

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The command line sends the member's bearer token: over plain HTTP only to this machine, where no one on the
// way can read it.
func TestClientRefusesPlainHTTPToAnotherMachine(t *testing.T) {
	for _, link := range []string{"http://team.example.com/sync#T", "http://10.0.0.7:8080/sync#T",
		"http://localhost.evil.example/sync#T"} {
		base, _, _ := SplitLink(link)
		if _, err := NewClient(link, base[:len(base)-len(Path)], "tok", &http.Client{}); err == nil ||
			!strings.Contains(err.Error(), "https") {
			t.Errorf("%s: want a refusal that asks for https, got %v", link, err)
		}
	}
	for _, link := range []string{"https://team.example.com/sync#T", "http://127.0.0.1:8080/sync#T",
		"http://localhost:8080/sync#T", "http://[::1]:8080/sync#T"} {
		base, _, _ := SplitLink(link)
		if _, err := NewClient(link, base[:len(base)-len(Path)], "tok", &http.Client{}); err != nil {
			t.Errorf("%s: %v", link, err)
		}
	}
}

// A server (or whoever answers for it) that redirects a step elsewhere gets neither the token, nor the ticket,
// nor the step's body sent on: the step fails, naming the redirect.
func TestClientFollowsNoRedirect(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reached = append(reached, r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get(TicketHeader)+" "+
			string(body))
		mu.Unlock()
		w.Header().Set(NextHeader, "next")
		w.Write([]byte(`{}`))
	}))
	defer other.Close()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, status)
		}))
		c, err := NewClient(srv.URL+Path+"#ticket", srv.URL, "secret-token", &http.Client{})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Rebase(t.Context(), []byte(`{"the":"manifest"}`))
		var se *StepError
		if !errors.As(err, &se) || se.Status != status {
			t.Errorf("a %d: want the step refused with its status, got %v", status, err)
		} else if !strings.Contains(se.Text, "redirected") {
			t.Errorf("a %d: the refusal does not say the server redirected: %q", status, se.Text)
		}
		srv.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) > 0 {
		t.Errorf("a redirect reached another server: %q", reached)
	}
}

// A link is checked against the server the member pinned as an address is told apart, whatever the spelling: the
// scheme, the host (any case, a trailing dot), the port (the scheme's default written or not), and the path the
// server is mounted under; anything else is refused, and neither is sent to.
func TestClientPinsTheServer(t *testing.T) {
	for _, tc := range []struct{ pin, link string }{
		{"https://team.example", "https://team.example/sync#T"},
		{"https://team.example/", "https://TEAM.Example:443/sync#T"},
		{"https://team.example.:443", "https://team.example/sync#T"},
		{"HTTPS://team.example", "https://team.example./sync#T"},
		{"https://team.example/e2b/", "https://team.example/e2b/sync#T"},
		{"http://127.0.0.1:8931", "http://127.0.0.1:8931/sync#T"},
		{"http://[::1]", "http://[::1]:80/sync#T"},
	} {
		if _, err := NewClient(tc.link, tc.pin, "tok", &http.Client{}); err != nil {
			t.Errorf("%s pinned, %s: %v", tc.pin, tc.link, err)
		}
	}
	for _, tc := range []struct{ pin, link string }{
		{"https://team.example", "https://evil.example/sync#T"},
		{"https://team.example", "https://team.example:8443/sync#T"},
		{"https://team.example:443", "http://team.example:443/sync#T"},
		{"https://team.example", "https://team.example.evil.com/sync#T"},
		{"https://team.example", "https://evilteam.example/sync#T"},
		{"https://team.example", "https://team.example@evil.com/sync#T"},
		{"https://team.example", "https://team.example:@team.example/sync#T"},
		{"https://team.example/e2b", "https://team.example/sync#T"},
		{"https://team.example/e2b", "https://team.example/e2b/x/sync#T"},
		{"https://team.example", "https://team.example/e2b/sync#T"},
		{"https://team.example/e2b", "https://team.example/e2b-other/sync#T"},
		{"http://127.0.0.1:8931", "http://localhost:8931/sync#T"},
		{"team.example", "https://team.example/sync#T"},
		{"https://me@team.example", "https://team.example/sync#T"},
		{"https://team.example/?x=1", "https://team.example/sync#T"},
		{"", "https://team.example/sync#T"},
	} {
		if _, err := NewClient(tc.link, tc.pin, "tok", &http.Client{}); !errors.Is(err, ErrNotTheServer) {
			t.Errorf("%q pinned, %s: want a refusal for want of the pinned server, got %v", tc.pin, tc.link, err)
		}
	}
}
