// Package pages is the server's two browser pages: the connect page, where a member stores their own E2B API key
// (connect.go), and the approval page, where a human answers a call the policy holds for them (approval.go). Each
// is an http.Handler made with what it needs, which the server mounts on its HTTP listener, or over stdio on a
// listener of its own on 127.0.0.1. This file is what they share: the headers that keep them out of frames, caches
// and other sites' reach, how a page is written, how its form is read, the origin a form's POST came from, and the
// values a browser's session derives from its cookie.
package pages

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"time"
)

// TokenOwners are the owners of e2b-mcp's bearer tokens (credentials.Tokens): a member proves to be an owner by
// giving a token of theirs.
type TokenOwners interface {
	Owner(token string) (owner string, ok bool)
}

// ExpiryText words when an approval request or a link expires for a human who may read it the next day, or in
// another zone than the server's: its date, time and zone.
func ExpiryText(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05 -07:00 MST") }

// RandomID is 32 random bytes, base64url: a link's ID, a cookie.
func RandomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// Purposes of the values derived from a session's cookie.
const (
	forCSRF     = "csrf"
	forState    = "oauth-state"
	forVerifier = "pkce-verifier"
	forNonce    = "oidc-nonce"
)

// fromCookie derives a value of the browser's session from its cookie, one per purpose: whoever lacks the cookie
// (another site, someone who reads the store, the identity provider that sees the state and the nonce) cannot
// compute it, nor one value from another.
func fromCookie(cookie, purpose string) string {
	m := hmac.New(sha256.New, []byte(cookie))
	m.Write([]byte("e2b-mcp/connect/" + purpose))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// pageMessage is a page with a message and no form.
type pageMessage struct{ Title, Text string }

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
