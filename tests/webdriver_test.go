package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// chromium is a headless Chromium from the system's packages, driven through chromedriver (the W3C WebDriver
// protocol over HTTP): a member's browser, with a profile (and so cookies) of its own.
type chromium struct {
	t       *testing.T
	driver  string // http://127.0.0.1:port
	session string
}

// requireChromedriver skips (fails in CI) when Chromium or chromedriver is not installed, and returns both.
func requireChromedriver(t *testing.T) (browser, driver string) {
	t.Helper()
	browser = requireChromium(t)
	driver, err := exec.LookPath("chromedriver")
	requireEnv(t, err == nil, "chromedriver is not installed (apt install chromium-driver)")
	return browser, driver
}

// startChromium starts chromedriver and a fresh headless Chromium session; both end with the test.
func (x *h) startChromium() *chromium {
	t := x.t.(*testing.T)
	t.Helper()
	browserBin, driverBin := requireChromedriver(t)

	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, driverBin, "--port="+strings.Split(port, ":")[1])
	cmd.Env = x.env() // a test's own HOME; for a headless test, no D-Bus session either
	cmd.Stdout, cmd.Stderr = x.capture("chromedriver stdout"), x.capture("chromedriver stderr")
	// Chromium, chromedriver's child, may outlive it holding the output pipes: Wait gives up on them after a while.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &chromium{t: t, driver: "http://" + port}
	t.Cleanup(func() {
		if c.session != "" {
			c.do(http.MethodDelete, "/session/"+c.session, nil)
		}
		cancel()
		_ = cmd.Wait()
	})
	waitfor.Until(t, 30*time.Second, "chromedriver to answer /status", func() bool {
		resp, err := http.Get(c.driver + "/status")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	// The flags for root in a container: no sandbox (root), no GPU, nothing fetched in the background.
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--password-store=basic",
		"--user-data-dir=" + t.TempDir()}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	c.call(http.MethodPost, "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"goog:chromeOptions": map[string]any{"binary": browserBin, "args": args},
		"timeouts":           map[string]any{"pageLoad": 30000, "implicit": 5000},
	}}}, &created)
	if created.SessionID == "" {
		t.Fatal("chromedriver made no session")
	}
	c.session = created.SessionID
	return c
}

// do sends one WebDriver command and returns the raw answer.
func (c *chromium) do(method, path string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.driver+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		c.t.Fatalf("webdriver %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// call sends a command that must succeed and decodes its value into v (when not nil).
func (c *chromium) call(method, path string, body, v any) {
	c.t.Helper()
	code, out := c.do(method, path, body)
	if code != http.StatusOK {
		c.t.Fatalf("webdriver %s %s: %d %s", method, path, code, out)
	}
	if v != nil {
		var wrap struct{ Value json.RawMessage }
		if err := json.Unmarshal(out, &wrap); err != nil || json.Unmarshal(wrap.Value, v) != nil {
			c.t.Fatalf("webdriver %s %s: cannot read %s", method, path, out)
		}
	}
}

func (c *chromium) s(path string) string { return "/session/" + c.session + path }

// open navigates to u and waits for the page to load.
func (c *chromium) open(u string) {
	c.t.Helper()
	c.call(http.MethodPost, c.s("/url"), map[string]string{"url": u}, nil)
}

func (c *chromium) element(css string) string {
	c.t.Helper()
	var el map[string]string
	c.call(http.MethodPost, c.s("/element"), map[string]string{"using": "css selector", "value": css}, &el)
	for _, id := range el {
		return id
	}
	c.t.Fatalf("no element %s", css)
	return ""
}

// fill types text into the field css names.
func (c *chromium) fill(css, text string) {
	c.t.Helper()
	c.call(http.MethodPost, c.s("/element/"+c.element(css)+"/value"), map[string]string{"text": text}, nil)
}

// submit clicks the element css names (a submit button) and waits until the browser has left the page for the
// form's answer. A click may return before the navigation it starts, and the old page may already hold what
// the caller waits for next (a heading, a form field), so the wait is for the old document itself to go: its
// root element turns stale once the answer replaced it.
func (c *chromium) submit(css string) {
	c.t.Helper()
	root := c.element("html")
	c.call(http.MethodPost, c.s("/element/"+c.element(css)+"/click"), map[string]any{}, nil)
	defer c.showPageIfFailed()
	waitfor.Until(c.t, 30*time.Second, "the browser to leave the page after clicking "+css, func() bool {
		code, out := c.do(http.MethodGet, c.s("/element/"+root+"/name"), nil)
		if code != http.StatusOK && code != http.StatusNotFound && !nodeOfAnotherDocument(code, out) {
			c.t.Fatalf("webdriver: waiting for the form's answer: %d %s", code, out)
		}
		return code != http.StatusOK // stale element reference (or no such element): a new document is loaded
	})
}

// showPageIfFailed logs the current page when the test has failed (deferred by a wait on the page, whose failure
// then shows what the browser had).
func (c *chromium) showPageIfFailed() {
	if c.t.Failed() {
		c.t.Logf("the page:\n%s", c.page())
	}
}

// nodeOfAnotherDocument reports chromedriver's other answers for a stale element: asked about an element of a
// document the browser is just replacing, it may pass on DevTools' complaint that the node is not in the (new)
// document as an "unknown error" (500) instead of "stale element reference" (404). Selenium's staleness waits
// meet the same answers (SeleniumHQ/selenium#15401, #12221).
func nodeOfAnotherDocument(code int, out []byte) bool {
	return code == http.StatusInternalServerError && (bytes.Contains(out, []byte("Node with given id does not belong to the document")) ||
		bytes.Contains(out, []byte("No node with given id found")))
}

// page is the current page's HTML.
func (c *chromium) page() string {
	c.t.Helper()
	var src string
	c.call(http.MethodGet, c.s("/source"), nil, &src)
	return src
}

// waitFor waits until the page contains want, and returns the page.
func (c *chromium) waitFor(want string) string {
	c.t.Helper()
	defer c.showPageIfFailed()
	var p string
	waitfor.Until(c.t, 30*time.Second, fmt.Sprintf("the page to show %q", want), func() bool {
		p = c.page()
		return strings.Contains(p, want)
	})
	return p
}

// signIn fills the identity provider's login form (zitadel's example provider) as user.
func (c *chromium) signIn(user string) {
	c.t.Helper()
	c.waitFor(`name="password"`)
	c.fill("#username", user)
	c.fill("#password", "verysecure")
	c.submit("button[type=submit]")
}

// connectKey submits key on the connect page's form and waits for the answer.
func (c *chromium) connectKey(key string) string {
	c.t.Helper()
	c.waitFor(`name="key"`)
	c.fill("#key", key)
	c.submit("button[type=submit]")
	return c.waitFor("</h1>")
}

// cookie is the value of the cookie name of the current page's site, HttpOnly ones included.
func (c *chromium) cookie(name string) string {
	c.t.Helper()
	var ck struct{ Value string }
	c.call(http.MethodGet, c.s("/cookie/"+name), nil, &ck)
	return ck.Value
}

func (c *chromium) String() string { return fmt.Sprintf("chromium session %s", c.session) }
