package browsertest

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// A browser sends back the cookie a page set, follows a redirect, and submits a form as a browser does: form-encoded,
// with the Origin it is given and none when it is given none.
func TestBrowserKeepsCookiesAndPostsForms(t *testing.T) {
	var origins []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			http.SetCookie(w, &http.Cookie{Name: "csrf", Value: "c1"})
			http.Redirect(w, r, "/landed", http.StatusSeeOther)
		case "/landed":
			w.Header().Set("X-Frame-Options", "DENY")
			_, _ = w.Write([]byte("landed"))
		case "/submit":
			c, err := r.Cookie("csrf")
			if err != nil || c.Value != "c1" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				http.Error(w, "no cookie, or not a form", http.StatusBadRequest)
				return
			}
			origins = append(origins, r.Header.Get("Origin"))
			_, _ = w.Write([]byte("choice=" + r.PostFormValue("choice")))
		}
	}))
	defer srv.Close()

	b := New(t)
	if code, page := b.Get(srv.URL + "/page"); code != http.StatusOK || page != "landed" {
		t.Fatalf("GET /page: %d %q, want the page it redirects to", code, page)
	}
	if code, h := b.Head(srv.URL + "/landed"); code != http.StatusOK || h.Get("X-Frame-Options") != "DENY" {
		t.Errorf("HEAD /landed: %d %v", code, h)
	}
	for _, origin := range []string{srv.URL, ""} {
		if code, page := b.PostForm(srv.URL+"/submit", origin, url.Values{"choice": {"approve"}}); code != http.StatusOK ||
			page != "choice=approve" {
			t.Errorf("POST /submit from %q: %d %q", origin, code, page)
		}
	}
	if len(origins) != 2 || origins[0] != srv.URL || origins[1] != "" {
		t.Errorf("the server saw the origins %q, want %q and none", origins, srv.URL)
	}
	if code, _ := New(t).PostForm(srv.URL+"/submit", srv.URL, nil); code != http.StatusBadRequest {
		t.Errorf("a new browser sent another's cookie: %d", code)
	}
}
