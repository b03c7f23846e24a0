package pages

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/browsertest"
	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/policy"
)

// tokenOwners is a tokens file of one token per owner.
type tokenOwners map[string]string

func (o tokenOwners) Owner(token string) (string, bool) {
	owner, ok := o[token]
	return owner, ok
}

// plainFields shows every argument as fmt prints it: the server's own way of showing them is its to test.
func plainFields(c policy.Call, _ int) (deciding, others []policy.Field) {
	for k, v := range c.Args {
		others = append(others, policy.Field{Name: k, Value: fmt.Sprint(v)})
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Name < others[j].Name })
	return nil, others
}

// approvalBrowser is a browser of the approval page.
type approvalBrowser struct {
	*browsertest.Browser
	t *testing.T
}

func newApprovalBrowser(t *testing.T) *approvalBrowser {
	return &approvalBrowser{Browser: browsertest.New(t), t: t}
}

// open GETs link and returns the status, the page and its form's CSRF token ("" without a form).
func (b *approvalBrowser) open(link string) (int, string, string) {
	b.t.Helper()
	status, page := b.Get(link)
	return status, page, browsertest.CSRF(page)
}

// answer POSTs the form with csrf, choice and token, from origin ("" for none).
func (b *approvalBrowser) answer(link, csrf, choice, token, origin string) (int, string) {
	b.t.Helper()
	form := url.Values{"csrf": {csrf}, "choice": {choice}}
	if token != "" {
		form.Set("token", token)
	}
	return b.PostForm(link, origin, form)
}

// The page is a capability that only a human's press on it uses: a GET approves nothing, a POST without the
// page's CSRF token, from another origin or naming none is refused, a link without its MAC is not a link, the
// call is shown escaped, an answer counts once, Approve on an authenticated server takes the owner's own token,
// and a link dies with its request.
func TestApprovalPage(t *testing.T) {
	clock := clocktest.New(time.Now())
	approvals, err := policy.OpenApprovals(t.TempDir(), 15*time.Minute, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	p := NewApproval(ApprovalOptions{Approvals: approvals, Key: []byte("0123456789abcdef0123456789abcdef"),
		TTL: 15 * time.Minute, Fields: plainFields, Owners: tokenOwners{"alice-token": "alice", "bob-token": "bob"},
		Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if p.Link("x") != "" || !p.Offered() {
		t.Fatalf("a page without an address: link %q, offered %v", p.Link("x"), p.Offered())
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.SetBase(srv.URL)

	call := policy.Call{Tool: "e2b_write_file", Args: map[string]any{"path": "<b>notes</b>.txt",
		"content": "<script>alert(1)</script>"}}
	req, err := approvals.Request(policy.Binding{Owner: "alice", Session: "s1", Tool: call.Tool, ArgsDigest: "d1"}, call)
	if err != nil {
		t.Fatal(err)
	}
	link := p.Link(req.ID)
	if !strings.HasPrefix(link, srv.URL+PathApprove+req.ID+".") {
		t.Fatalf("the link: %s", link)
	}
	waiting := func() bool {
		t.Helper()
		r, _, _, err := approvals.Show(req.ID)
		return err == nil && !r.Answered()
	}

	b := newApprovalBrowser(t)
	status, page, csrf := b.open(link + "?choice=approve")
	if status != http.StatusOK || csrf == "" || !waiting() {
		t.Fatalf("a GET (%d) answered the request, or showed no form:\n%s", status, page)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<b>notes") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the page does not show the call escaped:\n%s", page)
	}
	if code, h := b.Head(link); code != http.StatusOK || h.Get("Content-Security-Policy") == "" ||
		h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("the page lacks its headers (%d %v)", code, h)
	}
	if status, _, _ := newApprovalBrowser(t).open(link[:strings.LastIndex(link, ".")] + "." + strings.Repeat("A", 43)); status != http.StatusNotFound {
		t.Errorf("a made-up MAC: %d", status)
	}

	other := newApprovalBrowser(t) // never opened the page: it has no cookie
	own := srv.URL
	for name, try := range map[string]func() (int, string){
		"no CSRF token":           func() (int, string) { return b.answer(link, "", "approve", "alice-token", own) },
		"another browser's token": func() (int, string) { return other.answer(link, csrf, "approve", "alice-token", own) },
		"another site":            func() (int, string) { return b.answer(link, csrf, "approve", "alice-token", "http://evil.example") },
		"no origin":               func() (int, string) { return b.answer(link, csrf, "approve", "alice-token", "") },
		"no choice":               func() (int, string) { return b.answer(link, csrf, "", "alice-token", own) },
		"no owner's token":        func() (int, string) { return b.answer(link, csrf, "approve", "", own) },
		"another owner's token":   func() (int, string) { return b.answer(link, csrf, "approve", "bob-token", own) },
	} {
		if status, _ := try(); status < 400 {
			t.Errorf("%s: answered %d", name, status)
		}
		if !waiting() {
			t.Fatalf("%s: the request was answered", name)
		}
	}

	if status, page := b.answer(link, csrf, "approve", "alice-token", own); status != http.StatusOK || !strings.Contains(page, "Approved") {
		t.Fatalf("Approve answered %d\n%s", status, page)
	}
	if status, page := b.answer(link, csrf, "deny", "", own); status != http.StatusConflict || !strings.Contains(page, "Approved") {
		t.Errorf("a second answer: %d\n%s", status, page)
	}
	if r, _, _, _ := approvals.Show(req.ID); !r.Approved {
		t.Error("the second answer overturned the first")
	}

	// A link dies with its request: past the approvals' time, the page is gone.
	req2, err := approvals.Request(policy.Binding{Owner: "alice", Session: "s1", Tool: call.Tool, ArgsDigest: "d2"}, call)
	if err != nil {
		t.Fatal(err)
	}
	link2 := p.Link(req2.ID)
	b2 := newApprovalBrowser(t)
	status, _, csrf2 := b2.open(link2)
	if status != http.StatusOK {
		t.Fatalf("the second link answered %d", status)
	}
	clock.Advance(15 * time.Minute)
	if status, _, _ := b2.open(link2); status != http.StatusNotFound {
		t.Errorf("an expired link answered %d", status)
	}
	if status, _ := b2.answer(link2, csrf2, "approve", "alice-token", own); status != http.StatusNotFound {
		t.Errorf("Approve on an expired link answered %d", status)
	}
}
