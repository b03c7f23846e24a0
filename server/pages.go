package server

import (
	"html/template"
	"net/http"
	"net/url"
)

// What the server's browser pages (the connect page, the approval page) share: the headers that keep them out of
// frames, caches and other sites' reach, how a page is written, how its form is read, and the origin a form's POST
// came from.

// setPageHeaders marks an answer of a page: never cached, no script, no frame, forms only to the page itself.
func setPageHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "+
		"frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: that makes the form's Origin "null"
	h.Set("X-Content-Type-Options", "nosniff")
}

// postOrigin is the origin a POST says it came from: its Origin header, or without one its Referer's; "" when it
// says neither. Browsers send Origin on every cross-site POST (and on same-origin ones too, these days).
func postOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host != "" {
		return ref.Scheme + "://" + ref.Host
	}
	return ""
}

// writePage answers with a page: tmpl executed with data.
func writePage(w http.ResponseWriter, status int, tmpl *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = tmpl.Execute(w, data)
}

// readForm reads the form a page POSTed, of at most limit bytes; when it cannot, it answers with page and returns
// false.
func readForm(w http.ResponseWriter, r *http.Request, limit int64, page func(http.ResponseWriter, int,
	pageMessage)) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		page(w, http.StatusBadRequest, pageMessage{Title: "Refused", Text: "The form could not be read."})
		return false
	}
	return true
}
