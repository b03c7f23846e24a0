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
		if _, err := NewClient(link, "tok", &http.Client{}); err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("%s: want a refusal that asks for https, got %v", link, err)
		}
	}
	for _, link := range []string{"https://team.example.com/sync#T", "http://127.0.0.1:8080/sync#T",
		"http://localhost:8080/sync#T", "http://[::1]:8080/sync#T"} {
		if _, err := NewClient(link, "tok", &http.Client{}); err != nil {
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
		c, err := NewClient(srv.URL+Path+"#ticket", "secret-token", &http.Client{})
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
