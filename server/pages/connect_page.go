package pages

import (
	"html/template"
	"net/http"
)

// The connect page's HTML: one stylesheet in the page, forms that work without JavaScript, nothing loaded from
// elsewhere.
var connectTemplates = template.Must(template.New("layout").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · e2b-mcp</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em;color:#222}
label{display:block;margin-top:1em;font-weight:600}input[type=password]{width:100%;padding:.5em;font:inherit}
button{margin-top:1.5em;padding:.6em 1.2em;font:inherit}.error{color:#a00;font-weight:600}.note{color:#555;font-size:.9em}</style>
</head><body><h1>{{.Title}}</h1>
{{if .Form}}
<p>Connect your own E2B API key to e2b-mcp as <strong>{{.Owner}}</strong>. The server checks it with E2B and keeps it
for you; it is never shown again. Get a key from the <a href="https://e2b.dev/dashboard?tab=keys" rel="noopener noreferrer">E2B dashboard</a>.</p>
{{if .Error}}<p class="error">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}" autocomplete="off">
<input type="hidden" name="csrf" value="{{.CSRF}}">
{{if .AskToken}}<label for="token">Your e2b-mcp access token (it proves you are {{.Owner}})</label>
<input type="password" id="token" name="token" required>{{end}}
<label for="key">E2B API key</label>
<input type="password" id="key" name="key" required placeholder="e2b_…" spellcheck="false">
<button type="submit">Connect</button>
</form>
<p class="note">This page works once and for a few minutes only.</p>
{{else}}<p>{{.Text}}</p>{{end}}
</body></html>
`))

type pageData struct {
	Title, Text                string
	Form, AskToken             bool
	Owner, Action, CSRF, Error string
}

func (c *Connect) page(w http.ResponseWriter, status int, m pageMessage) {
	writePage(w, status, connectTemplates, pageData{Title: m.Title, Text: m.Text})
}

// form shows the form to the browser whose session cookie is cookie.
func (c *Connect) form(w http.ResponseWriter, owner, cookie string) {
	c.formError(w, owner, cookie, "")
}

// formError shows the form again with a message. The key the member typed is never put back into the page.
func (c *Connect) formError(w http.ResponseWriter, owner, cookie, msg string) {
	status := http.StatusOK
	if msg != "" {
		status = http.StatusBadRequest
	}
	writePage(w, status, connectTemplates, pageData{Title: "Connect your E2B account", Form: true,
		AskToken: c.prove == ProveToken,
		Owner:    owner, Action: PathConnectSubmit, CSRF: fromCookie(cookie, forCSRF), Error: msg})
}
