package pages

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/policy"
)

// The approval page is where a human answers a require_approval call that the client did not put to them (it
// answered the question with cancel, cannot ask, or asking failed). The model is given a link to hand to the
// user; the page shows the whole call, and the user presses Approve or Deny. The link is the request's ID with
// a MAC of it under a key only this server (and its replicas) holds, so that it cannot be made from the ID, nor
// read from any file: the approvals store holds no link. It works while the request waits and until it is
// answered, once. Opening it (GET) approves nothing; the answer is a POST that must come from the page itself
// (its Origin is the page's) carrying a CSRF token derived from a cookie set when the page was shown. An answer
// is bound to the request, and so to the owner, session, tool and exact arguments of its call.
//
// Where the caller is the user (stdio, an HTTP server on loopback without authentication), whoever holds the link
// can answer: the link is given to the model so that it gives it to the user, and a model with a browser or shell
// on the user's machine could open it itself (the documentation says so). A server that authenticates its callers
// is reachable from sandboxes (at --public-url), so there the link proves nothing: Approve takes the call's
// owner's own e2b-mcp token, as the connect page does, and a server whose callers have no token to give (OAuth
// alone) offers no page, so that only an operator approves outside the chat. A policy that wants an approver the
// model cannot reach says approver: operator, and then no page is offered.

// PathApprove is the approval page's path prefix: PathApprove + request ID + "." + MAC.
const PathApprove = "/approve/"

const (
	approveCookie = "e2bmcp_approve"
	// maxApproveForm bounds the answer's POST: a CSRF token and a choice.
	maxApproveForm = 4 << 10
	// forApprovalCSRF is the purpose of the page's CSRF token, derived from its cookie (fromCookie) per request.
	forApprovalCSRF = "approval-csrf/"
)

// ApprovalKeyLabel names the links' key where replicas derive it from the data key they share.
const ApprovalKeyLabel = "e2b-mcp approval page"

// ApprovalOptions are what the approval page needs.
type ApprovalOptions struct {
	Approvals *policy.Approvals
	// Key signs the links: this process's own, or for replicas one derived from the data key they share, so that a
	// link made by one works on all of them (the approvals are in the database too).
	Key []byte
	// TTL is how long a request waits for its answer, and so how long the page's cookie lives.
	TTL time.Duration
	// Fields are the arguments of call that decide the policy and the others, each value at most about max bytes,
	// as a human judges them.
	Fields func(call policy.Call, max int) (deciding, others []policy.Field)
	// Owners, when set, are the tokens whose owner must be the call's for Approve (an authenticated server).
	Owners TokenOwners
	// Unprovable says the server authenticates its callers but they have no token to prove themselves with here,
	// so no page is offered.
	Unprovable bool
	Log        *slog.Logger
}

// Approval serves the page and makes the links to it.
type Approval struct {
	approvals  *policy.Approvals
	key        []byte
	ttl        time.Duration
	fields     func(policy.Call, int) ([]policy.Field, []policy.Field)
	log        *slog.Logger
	owners     TokenOwners
	unprovable bool

	mu     sync.Mutex
	base   string // the page's origin, e.g. http://127.0.0.1:41234; "" until known
	secure bool   // the page is served over https: the cookie is Secure
}

// NewApproval makes the page; it makes links once its origin is known (SetBase).
func NewApproval(o ApprovalOptions) *Approval {
	return &Approval{approvals: o.Approvals, key: o.Key, ttl: o.TTL, fields: o.Fields, log: o.Log, owners: o.Owners,
		unprovable: o.Unprovable}
}

// Offered reports whether links to the page are given: not where the callers cannot prove themselves on it.
func (p *Approval) Offered() bool { return !p.unprovable }

// SetBase sets the page's origin once it is known (the listener's address, or the public URL).
func (p *Approval) SetBase(base string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.base = strings.TrimSuffix(base, "/")
	p.secure = strings.HasPrefix(base, "https://")
}

func (p *Approval) origin() (base string, secure bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.base, p.secure
}

// Link is the link to the page for request id; "" when the page has no address (yet).
func (p *Approval) Link(id string) string {
	base, _ := p.origin()
	if base == "" {
		return ""
	}
	return base + PathApprove + id + "." + p.mac(id)
}

func (p *Approval) mac(id string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("e2b-mcp/approval-page\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var (
	errApprovalLinkGone = pageMessage{Title: "This link cannot be used",
		Text: "The call is no longer waiting: it was answered and made, or its time ran out. Ask your assistant to make " +
			"the call again for a new link."}
	errApprovalStale = pageMessage{Title: "Refused",
		Text: "The answer did not come from this page as it was shown in this browser. Open the link again and " +
			"press the button there."}
)

// ServeHTTP shows the page (GET) and takes its answer (POST).
func (p *Approval) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setPageHeaders(w.Header())
	id, mac, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, PathApprove), ".")
	if id == "" || subtle.ConstantTimeCompare([]byte(mac), []byte(p.mac(id))) != 1 {
		p.page(w, http.StatusNotFound, pageMessage{Title: "Not an approval link", Text: "Open the link exactly as " +
			"your assistant gave it."})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		p.show(w, r, id)
	case http.MethodPost:
		p.answer(w, r, id)
	default:
		p.page(w, http.StatusMethodNotAllowed, pageMessage{Title: "Not here", Text: "Open the link you were given."})
	}
}

// show shows the call and the form; it changes nothing but the browser's cookie. A browser that has the cookie
// keeps it, so that the page open in two of its tabs works in both.
func (p *Approval) show(w http.ResponseWriter, r *http.Request, id string) {
	req, call, ok, err := p.approvals.Show(id)
	if err != nil {
		p.failed(w, err)
		return
	}
	if req.Answered() {
		p.page(w, http.StatusConflict, answeredMessage(req))
		return
	}
	cookie := RandomID()
	if ck, err := r.Cookie(approveCookie); err == nil && len(ck.Value) == len(cookie) {
		cookie = ck.Value
	}
	_, secure := p.origin()
	http.SetCookie(w, &http.Cookie{
		Name: approveCookie, Value: cookie, Path: PathApprove, MaxAge: int(p.ttl / time.Second),
		HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode, // no way here goes through another site
	})
	d := approvalPageData{Title: "Approve this call?", Form: true, Request: req, CSRF: fromCookie(cookie,
		forApprovalCSRF+req.ID),
		Expires: ExpiryText(req.Expires), Token: p.owners != nil}
	if ok {
		d.Tool = call.Tool
		d.Fields, d.Args = p.fields(call, pageValueBytes)
	} else {
		d.Tool = req.Summary
	}
	writePage(w, http.StatusOK, approvalTemplate, d)
}

// answer takes the human's Approve or Deny: from this page's origin, in the browser the page was shown in, for
// a request nobody has answered yet.
func (p *Approval) answer(w http.ResponseWriter, r *http.Request, id string) {
	if base, _ := p.origin(); base == "" || postOrigin(r) != base {
		p.page(w, http.StatusForbidden, pageMessage{Title: "Refused", Text: "The answer was not sent " +
			"from the approval page."})
		return
	}
	if !readForm(w, r, maxApproveForm, p.page) {
		return
	}
	ck, err := r.Cookie(approveCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(fromCookie(ck.Value,
		forApprovalCSRF+id))) != 1 {
		p.page(w, http.StatusForbidden, errApprovalStale)
		return
	}
	var approve bool
	switch r.PostForm.Get("choice") {
	case "approve":
		approve = true
	case "deny":
	default:
		p.page(w, http.StatusBadRequest, pageMessage{Title: "Refused", Text: "Press Approve or Deny."})
		return
	}
	if approve && p.owners != nil && !p.ownersToken(w, id, r.PostForm.Get("token")) {
		return
	}
	req, err := p.approvals.Answer(id, approve, policy.ViaPage)
	if errors.Is(err, policy.ErrAlreadyAnswered) {
		if req, _, _, err := p.approvals.Show(id); err == nil {
			p.page(w, http.StatusConflict, answeredMessage(req))
			return
		}
	}
	if err != nil {
		p.failed(w, err)
		return
	}
	p.log.Info("approval page answered", "id", req.ID, "approved", req.Approved, "owner", req.Binding.Owner,
		"tool", req.Binding.Tool)
	p.page(w, http.StatusOK, answeredMessage(req))
}

// ownersToken reports whether token is the e2b-mcp token of request id's owner; false with the refusal written
// when it is not. Denying needs no proof: it only keeps a call from running.
func (p *Approval) ownersToken(w http.ResponseWriter, id, token string) bool {
	req, _, _, err := p.approvals.Show(id)
	if err != nil {
		p.failed(w, err)
		return false
	}
	if owner, ok := p.owners.Owner(strings.TrimSpace(token)); !ok || owner != req.Binding.Owner {
		p.page(w, http.StatusForbidden, pageMessage{Title: "Refused", Text: "Approving takes the e2b-mcp token of " +
			req.Binding.Owner + ", whose call it is. Open the link again and give it with Approve."})
		return false
	}
	return true
}

// answeredMessage says what became of a request a human answered.
func answeredMessage(req policy.Pending) pageMessage {
	if req.Approved {
		return pageMessage{Title: "Approved", Text: "Your assistant can now make the call, once: tell it to go on. You " +
			"can close this page."}
	}
	return pageMessage{Title: "Denied", Text: "The call will not run: your assistant is told you denied it when it " +
		"tries again. You can close this page."}
}

// failed answers a request the approvals could not serve: a request that is not waiting (used, expired) is gone;
// anything else (the store out of reach) is logged, and the page asks to try again.
func (p *Approval) failed(w http.ResponseWriter, err error) {
	if errors.Is(err, policy.ErrUnknownApproval) || errors.Is(err, policy.ErrApprovalExpired) {
		p.page(w, http.StatusNotFound, errApprovalLinkGone)
		return
	}
	p.log.Error("approval page: the approvals store failed", "error", err)
	p.page(w, http.StatusServiceUnavailable, pageMessage{Title: "Try again", Text: "The server could not reach its " +
		"approvals; try again in a moment."})
}

// pageValueBytes bounds each value the page shows, by its head and tail: the page shows the whole call, and a
// file of megabytes, which the call may write, would make a page of megabytes.
const pageValueBytes = 64 << 10

var approvalTemplate = template.Must(template.New("approve").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · e2b-mcp</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem;color:#222}
dt{font-weight:600;margin-top:.5rem}dd{margin:0;font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
pre{background:#f4f4f4;padding:.75rem;white-space:pre-wrap;word-break:break-all}
button{font:inherit;padding:.5rem 1.5rem;margin-right:1rem}.note{color:#555;font-size:.9em}</style>
</head><body><h1>{{.Title}}</h1>
{{if .Form}}
<p>The policy of e2b-mcp asks a human before this call runs. It was made by <strong>{{.Request.Binding.Owner}}</strong>,
session <strong>{{.Request.Binding.Session}}</strong>. Approve only if you asked your assistant for it.</p>
<dl><dt>tool</dt><dd>{{.Tool}}</dd>{{range .Fields}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>
{{if .Args}}<p>The other arguments:</p>
<dl>{{range .Args}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>{{end}}
<p class="note">Each value is shown as the call will use it, escaped (\n is a new line), long ones by their head and
tail. Only a value that is exactly a credential (an API key, a token) is masked, and the mask says what it is.</p>
<form method="post" autocomplete="off">
<input type="hidden" name="csrf" value="{{.CSRF}}">
{{if .Token}}<p><label>Your e2b-mcp token, which Approve needs (it shows that the call is yours):
<input type="password" name="token" autocomplete="off" size="40"></label></p>{{end}}
<button type="submit" name="choice" value="approve">Approve</button>
<button type="submit" name="choice" value="deny">Deny</button>
</form>
<p class="note">Approval {{.Request.ID}}. Approving lets this exact call run once, if it is made before {{.Expires}}.
Denying refuses it. Either answer can be given once.</p>
{{else}}<p>{{.Text}}</p>{{end}}
</body></html>
`))

type approvalPageData struct {
	Title, Text string
	Form        bool
	Request     policy.Pending
	Tool        string
	Fields      []policy.Field
	Args        []policy.Field
	CSRF        string
	Expires     string
	Token       bool // Approve takes the owner's token
}

func (p *Approval) page(w http.ResponseWriter, status int, m pageMessage) {
	writePage(w, status, approvalTemplate, approvalPageData{Title: m.Title, Text: m.Text})
}
