package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

const (
	cpKey   = "e2b_5f3a9c0d1e2b4a6f8c7d9e0a1b2c3d4e5f6a7b8c"
	cpOther = "e2b_00000000000000000000000000000000000000ff"
	cpUA    = "e2b-mcp-test/1.0"
)

func cpEmulator(t *testing.T) *e2btest.Server {
	t.Helper()
	srv, err := e2btest.New(e2btest.Options{ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func cpClient(t *testing.T, baseURL string, mods ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		APIKey: cpKey, APIURL: baseURL, SandboxURL: baseURL, UserAgent: cpUA,
		MaxRetries: 3, RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond, RequestTimeout: 10 * time.Second,
		RedialFor: 300 * time.Millisecond,
	}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cpCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cpCheckHeaders asserts the headers every control-plane request carries.
func cpCheckHeaders(t *testing.T, r e2btest.RecordedRequest, withBody bool) {
	t.Helper()
	if got := r.Header.Get("X-API-Key"); got != cpKey {
		t.Errorf("%s %s: X-API-Key %q", r.Method, r.Path, got)
	}
	if got := r.Header.Get("User-Agent"); got != cpUA {
		t.Errorf("%s %s: User-Agent %q", r.Method, r.Path, got)
	}
	if got := r.Header.Get("Content-Type"); withBody && got != "application/json" || !withBody && got != "" {
		t.Errorf("%s %s: Content-Type %q", r.Method, r.Path, got)
	}
}

func cpBodyKeys(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return m
}

func cpSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestCreateSandboxWire(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	yes := true
	md := map[string]string{"e2b-mcp": "true", "e2b-mcp.owner": "alice"}
	sb, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base", Timeout: 300, Secure: true,
		AllowInternetAccess: &yes, Metadata: md, EnvVars: map[string]string{"FOO": "bar"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md) != 2 {
		t.Fatalf("caller's metadata changed: %v", md)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v2/sandboxes" || r.RawQuery != "" {
		t.Fatalf("%s %s?%s", r.Method, r.Path, r.RawQuery)
	}
	cpCheckHeaders(t, r, true)
	body := cpBodyKeys(t, r.Body)
	// NewSandboxV2 has no secure: v2 sandboxes are always secured.
	if got := cpSortedKeys(body); !slices.Equal(got, []string{"allow_internet_access", "envVars", "metadata", "templateID", "timeout"}) {
		t.Fatalf("body keys %v", got)
	}
	var sent wire.NewSandboxV2
	if err := json.Unmarshal(r.Body, &sent); err != nil {
		t.Fatal(err)
	}
	reqID := sent.Metadata[RequestIDMetadataKey]
	if *sent.TemplateID != "base" || *sent.Timeout != 300 || !*sent.AllowInternetAccess ||
		sent.Metadata["e2b-mcp.owner"] != "alice" || len(sent.Metadata) != 3 || len(reqID) != 24 || sent.EnvVars["FOO"] != "bar" {
		t.Fatalf("sent %+v", sent)
	}

	rec, ok := srv.Sandbox(sb.SandboxID)
	if !ok {
		t.Fatal("no such sandbox in the emulator")
	}
	if sb.EnvdAccessToken == "" || sb.EnvdAccessToken != rec.AccessToken || sb.ClientID != "6532622b" ||
		sb.EnvdVersion != "0.6.13" || sb.TemplateID != "base" || sb.Domain == nil || *sb.Domain != "e2b.local" {
		t.Fatalf("answer %+v", sb)
	}
	if conn := c.Conn(sb); conn.Domain != "e2b.local" || conn.AccessToken != rec.AccessToken || conn.ID != rec.ID {
		t.Fatalf("conn %+v", conn)
	}

	// Zero values: no timeout (E2B's default), empty maps, no autoPause.
	srv.ResetRequests()
	sb2, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	body = cpBodyKeys(t, srv.Requests()[0].Body)
	if got := cpSortedKeys(body); !slices.Equal(got, []string{"envVars", "metadata", "templateID"}) {
		t.Fatalf("minimal body keys %v", got)
	}
	if string(body["envVars"]) != "{}" {
		t.Fatalf("minimal body %s", srv.Requests()[0].Body)
	}
	if rec, _ := srv.Sandbox(sb2.SandboxID); rec.EndAt.Sub(rec.StartedAt) != 15*time.Second || sb2.EnvdAccessToken == "" {
		t.Fatalf("default timeout %v, token %q", rec.EndAt.Sub(rec.StartedAt), sb2.EnvdAccessToken)
	}
}

func TestCreateSandboxErrors(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	_, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "nope"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Message != "template 'nope' not found" || !errors.Is(err, ErrNotFound) || ae.Op != "create sandbox" {
		t.Fatalf("unknown template: %v", err)
	}
	_, err = c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base", Timeout: -1})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "Timeout must be greater than 0") {
		t.Fatalf("bad timeout: %v", err)
	}
	// 4xx answers are final: one request each, and no listing to reconcile.
	for _, r := range srv.Requests() {
		if r.Method != "POST" || r.Path != "/v2/sandboxes" {
			t.Fatalf("unexpected %s %s", r.Method, r.Path)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}
}

// On an E2B without the v2 routes, create and connect fall back to the v1 forms (secure kept), once: the client
// then sends the v1 forms straight away.
func TestV1OnlyE2B(t *testing.T) {
	srv, err := e2btest.New(e2btest.Options{V1Only: true, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	sb, err := c.CreateSandbox(ctx, NewSandbox{TemplateID: "base", Secure: true})
	if err != nil || sb.EnvdAccessToken == "" {
		t.Fatalf("create: %+v %v", sb, err)
	}
	if _, _, err := c.ConnectSandbox(ctx, sb.SandboxID, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSandbox(ctx, NewSandbox{TemplateID: "base"}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, r := range srv.Requests() {
		calls = append(calls, r.Method+" "+strings.Replace(r.Path, sb.SandboxID, "ID", 1))
	}
	want := []string{"POST /v2/sandboxes", "POST /sandboxes", "POST /sandboxes/ID/connect", "POST /sandboxes"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if body := cpBodyKeys(t, srv.Requests()[1].Body); string(body["secure"]) != "true" {
		t.Fatalf("v1 body %s", srv.Requests()[1].Body)
	}
	// A sandbox that does not exist is E2B's 404, not a missing route: no second request.
	srv.ResetRequests()
	if _, _, err := c.ConnectSandbox(ctx, "nosuchsandbox", 60); !errors.Is(err, ErrNotFound) || len(srv.Requests()) != 1 {
		t.Fatalf("connect to nothing: %v, %d requests", err, len(srv.Requests()))
	}
}

func TestConnectSandbox(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Secure: true, Timeout: time.Minute})

	sb, resumed, err := c.ConnectSandbox(ctx, rec.ID, 600)
	if err != nil || resumed || sb.SandboxID != rec.ID || sb.EnvdAccessToken != rec.AccessToken {
		t.Fatalf("connect running: %+v %v %v", sb, resumed, err)
	}
	r := srv.Requests()[0]
	if r.Method != "POST" || r.Path != "/v2/sandboxes/"+rec.ID+"/connect" || string(r.Body) != `{"timeout":600}` {
		t.Fatalf("wire: %s %s %s", r.Method, r.Path, r.Body)
	}
	cpCheckHeaders(t, r, true)
	if after, _ := srv.Sandbox(rec.ID); after.EndAt.Sub(after.StartedAt) < 599*time.Second {
		t.Fatalf("not extended: %v", after.EndAt.Sub(after.StartedAt))
	}

	if paused, err := c.PauseSandbox(ctx, rec.ID); err != nil || paused {
		t.Fatalf("pause: %v %v", paused, err)
	}
	sb, resumed, err = c.ConnectSandbox(ctx, rec.ID, 60)
	if err != nil || !resumed || sb.SandboxID != rec.ID {
		t.Fatalf("connect paused: %+v %v %v", sb, resumed, err)
	}
	if after, _ := srv.Sandbox(rec.ID); after.State != e2btest.StateRunning {
		t.Fatalf("state %s", after.State)
	}

	_, _, err = c.ConnectSandbox(ctx, "nosuchsandbox", 60)
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, ErrNotFound) || ae.SandboxID != "nosuchsandbox" ||
		ae.Message != `Sandbox "nosuchsandbox" doesn't exist or you don't have access to it` {
		t.Fatalf("missing: %v", err)
	}
}

func TestGetSandbox(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Secure: true, AutoPause: true, Metadata: map[string]string{"k": "v"}})
	d, err := c.GetSandbox(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.SandboxID != rec.ID || d.State != StateRunning || d.Metadata["k"] != "v" || d.EnvdAccessToken != rec.AccessToken ||
		d.Domain == nil || *d.Domain != "e2b.local" || d.Lifecycle == nil || d.Lifecycle.OnTimeout != "pause" ||
		!d.StartedAt.Equal(rec.StartedAt) || !d.EndAt.Equal(rec.EndAt) || d.CPUCount <= 0 || d.EnvdVersion == "" {
		t.Fatalf("detail %+v", d)
	}
	r := srv.Requests()[0]
	if r.Method != "GET" || r.Path != "/sandboxes/"+rec.ID || len(r.Body) != 0 {
		t.Fatalf("wire %s %s", r.Method, r.Path)
	}
	cpCheckHeaders(t, r, false)

	if _, err := c.PauseSandbox(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := c.GetSandbox(ctx, rec.ID); err != nil || d.State != StatePaused {
		t.Fatalf("paused: %+v %v", d, err)
	}
	// Another team's client sees nothing.
	other := cpClient(t, srv.URL(), func(cfg *Config) { cfg.APIKey = cpOther })
	_, err = other.GetSandbox(ctx, rec.ID)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Message != `Sandbox "`+rec.ID+`" doesn't exist or you don't have access to it` {
		t.Fatalf("other team: %v", err)
	}
}

func TestListSandboxesWire(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	md := map[string]string{"e2b-mcp.session_id": "s 1/é", "owner": "alice"}
	match1, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{"e2b-mcp.session_id": "s 1/é", "owner": "alice", "x": "y"}})
	match2, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: md})
	if _, err := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{"e2b-mcp.session_id": "s 1", "owner": "alice"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.CreateSandbox(cpOther, e2btest.SandboxOptions{Metadata: md}); err != nil {
		t.Fatal(err)
	}

	got, err := c.ListSandboxes(cpCtx(t), ListQuery{Metadata: md, States: []string{StateRunning, StatePaused}})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, s := range got {
		ids = append(ids, s.SandboxID)
		if s.State != StateRunning || s.ClientID != "6532622b" || s.StartedAt.IsZero() || s.EndAt.IsZero() {
			t.Errorf("listed %+v", s)
		}
	}
	slices.Sort(ids)
	want := []string{match1.ID, match2.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("listed %v, want %v", ids, want)
	}
	r := srv.Requests()[0]
	// The SDK's urlencode({quote(k): quote(v)}) as the value of one metadata parameter, escaped whole.
	wantQuery := "metadata=e2b-mcp.session_id%3Ds%2525201%252F%2525C3%2525A9%26owner%3Dalice&state=running,paused"
	if r.Method != "GET" || r.Path != "/v2/sandboxes" || r.RawQuery != wantQuery {
		t.Fatalf("wire %s %s?%s\nwant ?%s", r.Method, r.Path, r.RawQuery, wantQuery)
	}
	cpCheckHeaders(t, r, false)

	// States filter and no filter at all.
	if _, err := c.PauseSandbox(cpCtx(t), match1.ID); err != nil {
		t.Fatal(err)
	}
	paused, err := c.ListSandboxes(cpCtx(t), ListQuery{States: []string{StatePaused}})
	if err != nil || len(paused) != 1 || paused[0].SandboxID != match1.ID || paused[0].State != StatePaused {
		t.Fatalf("paused: %+v %v", paused, err)
	}
	srv.ResetRequests()
	all, err := c.ListSandboxes(cpCtx(t), ListQuery{})
	if err != nil || len(all) != 3 || srv.Requests()[0].RawQuery != "" {
		t.Fatalf("all: %d %v %q", len(all), err, srv.Requests()[0].RawQuery)
	}
	// Characters E2B's server would mangle under the SDK's encoding ('+', '%', '&', '=') survive.
	tricky := map[string]string{"e2b-mcp.owner": "alice+ci@example.com", "note": "100% a=b&c"}
	want3, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: tricky})
	if _, err := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{"e2b-mcp.owner": "alice ci@example.com", "note": "100% a=b&c"}}); err != nil {
		t.Fatal(err)
	}
	got, err = c.ListSandboxes(cpCtx(t), ListQuery{Metadata: tricky})
	if err != nil || len(got) != 1 || got[0].SandboxID != want3.ID || got[0].Metadata["e2b-mcp.owner"] != "alice+ci@example.com" {
		t.Fatalf("tricky metadata: %+v %v", got, err)
	}
	// An empty listing is an empty slice, not nil.
	none, err := c.ListSandboxes(cpCtx(t), ListQuery{Metadata: map[string]string{"no": "match"}})
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("none: %v %v", none, err)
	}
}

func TestListSandboxesPaging(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	for range 230 {
		if _, err := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{"batch": "1"}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ListSandboxes(cpCtx(t), ListQuery{Metadata: map[string]string{"batch": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range got {
		seen[s.SandboxID] = true
	}
	if len(got) != 230 || len(seen) != 230 {
		t.Fatalf("%d listed, %d unique", len(got), len(seen))
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d pages", len(reqs))
	}
	for i, r := range reqs {
		q, err := url.ParseQuery(r.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		if q.Get("metadata") != "batch=1" || (i == 0) != (q.Get("nextToken") == "") {
			t.Fatalf("page %d query %q", i, r.RawQuery)
		}
	}

	srv.ResetRequests()
	got, err = c.ListSandboxes(cpCtx(t), ListQuery{PageSize: 50})
	if err != nil || len(got) != 230 {
		t.Fatalf("page size 50: %d %v", len(got), err)
	}
	if reqs := srv.Requests(); len(reqs) != 5 || !strings.HasPrefix(reqs[0].RawQuery, "limit=50") {
		t.Fatalf("%d requests, first %q", len(reqs), reqs[0].RawQuery)
	}
}

func TestListSandboxesRepeatedToken(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next-Token", "same")
		_, _ = w.Write([]byte(`[]`))
	}))
	defer ts.Close()
	_, err := cpClient(t, ts.URL).ListSandboxes(cpCtx(t), ListQuery{})
	if err == nil || !strings.Contains(err.Error(), "repeated a page token") {
		t.Fatalf("err %v", err)
	}
}

func TestKillPauseTimeout(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Timeout: time.Hour})

	if err := c.SetTimeout(ctx, rec.ID, 30); err != nil {
		t.Fatal(err)
	}
	if after, _ := srv.Sandbox(rec.ID); after.EndAt.Sub(after.StartedAt) > time.Minute {
		t.Fatalf("timeout not shortened: %v", after.EndAt.Sub(after.StartedAt))
	}
	already, err := c.PauseSandbox(ctx, rec.ID)
	if err != nil || already {
		t.Fatalf("pause: %v %v", already, err)
	}
	already, err = c.PauseSandbox(ctx, rec.ID)
	if err != nil || !already {
		t.Fatalf("pause twice: %v %v", already, err)
	}
	if err := c.KillSandbox(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.KillSandbox(ctx, rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("kill twice: %v", err)
	}
	if _, err := c.PauseSandbox(ctx, rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pause killed: %v", err)
	}
	if err := c.SetTimeout(ctx, rec.ID, 30); !errors.Is(err, ErrNotFound) {
		t.Fatalf("timeout killed: %v", err)
	}

	want := []struct{ method, path, body string }{
		{"POST", "/sandboxes/" + rec.ID + "/timeout", `{"timeout":30}`},
		{"POST", "/sandboxes/" + rec.ID + "/pause", `{"memory":true}`},
		{"POST", "/sandboxes/" + rec.ID + "/pause", `{"memory":true}`},
		{"DELETE", "/sandboxes/" + rec.ID, ``},
	}
	reqs := srv.Requests()
	for i, w := range want {
		r := reqs[i]
		if r.Method != w.method || r.Path != w.path || string(r.Body) != w.body {
			t.Errorf("request %d: %s %s %s", i, r.Method, r.Path, r.Body)
		}
		cpCheckHeaders(t, r, w.body != "")
	}
}

func TestPauseConflictInTransition(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(409)
		_, _ = w.Write([]byte(`{"code":409,"message":"Sandbox 'abc' cannot be paused while in 'killing' state"}`))
	}))
	defer ts.Close()
	already, err := cpClient(t, ts.URL).PauseSandbox(cpCtx(t), "abc")
	if already || !errors.Is(err, ErrConflict) {
		t.Fatalf("%v %v", already, err)
	}
}

func TestSnapshotsClient(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})

	snap, err := c.CreateSnapshot(ctx, rec.ID, "")
	if err != nil || !strings.HasSuffix(snap.SnapshotID, ":default") || snap.Names == nil || len(snap.Names) != 0 {
		t.Fatalf("unnamed: %+v %v", snap, err)
	}
	named, err := c.CreateSnapshot(ctx, rec.ID, "nightly")
	if err != nil || !strings.HasSuffix(named.SnapshotID, "/nightly:default") || len(named.Names) != 1 {
		t.Fatalf("named: %+v %v", named, err)
	}
	reqs := srv.Requests()
	if r := reqs[0]; r.Method != "POST" || r.Path != "/sandboxes/"+rec.ID+"/snapshots" || string(r.Body) != `{}` {
		t.Fatalf("wire: %s %s %s", r.Method, r.Path, r.Body)
	}
	if r := reqs[1]; string(r.Body) != `{"name":"nightly"}` {
		t.Fatalf("named body %s", r.Body)
	}

	// A snapshot works as a template.
	child, err := c.CreateSandbox(ctx, NewSandbox{TemplateID: named.SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSnapshot(ctx, child.SandboxID, ""); err != nil {
		t.Fatal(err)
	}

	all, err := c.ListSnapshots(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %+v %v", all, err)
	}
	mine, err := c.ListSnapshots(ctx, rec.ID)
	if err != nil || len(mine) != 2 || mine[0].SnapshotID != named.SnapshotID || mine[1].SnapshotID != snap.SnapshotID {
		t.Fatalf("of %s: %+v %v", rec.ID, mine, err)
	}
	srv.ResetRequests()
	if err := c.DeleteSnapshot(ctx, named.SnapshotID); err != nil {
		t.Fatal(err)
	}
	// One path segment, escaped as quote(id, safe=""): "/" and ":" are escaped.
	wantPath := "/templates/" + strings.ReplaceAll(strings.ReplaceAll(named.SnapshotID, "/", "%2F"), ":", "%3A")
	if r := srv.Requests()[0]; r.Method != "DELETE" || r.Path != wantPath {
		t.Fatalf("delete wire %s %s, want %s", r.Method, r.Path, wantPath)
	}
	if err := c.DeleteSnapshot(ctx, named.SnapshotID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := c.DeleteSnapshot(ctx, ""); err == nil {
		t.Fatal("empty ID accepted")
	}
	if _, err := c.CreateSnapshot(ctx, "missing", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot of missing: %v", err)
	}
}

func TestListSnapshotsPaging(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	for range 105 {
		if _, err := c.CreateSnapshot(ctx, rec.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	srv.ResetRequests()
	got, err := c.ListSnapshots(ctx, rec.ID+"-6532622b")
	if err != nil || len(got) != 105 {
		t.Fatalf("%d %v", len(got), err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].RawQuery != "sandboxID="+rec.ID || !strings.HasPrefix(reqs[1].RawQuery, "sandboxID="+rec.ID+"&nextToken=") {
		t.Fatalf("%d requests: %q", len(reqs), reqs[0].RawQuery)
	}
}

func TestForkSandbox(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Secure: true})
	res, err := c.ForkSandbox(ctx, rec.ID, ForkRequest{Timeout: 120, Count: 2})
	if err != nil || len(res) != 2 {
		t.Fatalf("fork: %+v %v", res, err)
	}
	for _, r := range res {
		if r.Error != nil || r.Sandbox == nil || r.Sandbox.SandboxID == rec.ID || r.Sandbox.EnvdAccessToken == "" {
			t.Fatalf("result %+v", r)
		}
		if _, ok := srv.Sandbox(r.Sandbox.SandboxID); !ok {
			t.Fatalf("fork %s not in the emulator", r.Sandbox.SandboxID)
		}
	}
	if r := srv.Requests()[0]; r.Path != "/sandboxes/"+rec.ID+"/fork" || string(r.Body) != `{"timeout":120,"count":2}` {
		t.Fatalf("wire %s %s", r.Path, r.Body)
	}
	srv.ResetRequests()
	if _, err := c.ForkSandbox(ctx, rec.ID, ForkRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[0]; string(r.Body) != `{"count":1}` {
		t.Fatalf("default body %s", r.Body)
	}
	if _, err := c.PauseSandbox(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForkSandbox(ctx, rec.ID, ForkRequest{Count: 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("fork paused: %v", err)
	}
}

func TestForkResultErrors(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`[{"sandbox":{"sandboxID":"f1","templateID":"base","clientID":"6532622b","envdVersion":"0.6.13"}},` +
			`{"error":{"code":429,"message":"you have reached the maximum number of concurrent E2B sandboxes (20)","error_code":"sandbox_capacity_unavailable"}},{}]`))
	}))
	defer ts.Close()
	res, err := cpClient(t, ts.URL).ForkSandbox(cpCtx(t), "orig", ForkRequest{Count: 3})
	if err != nil || len(res) != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	if res[0].Sandbox == nil || res[0].Sandbox.SandboxID != "f1" || res[0].Error != nil {
		t.Fatalf("first %+v", res[0])
	}
	e := res[1].Error
	if res[1].Sandbox != nil || e == nil || e.Status != 429 || e.Code != "sandbox_capacity_unavailable" ||
		!errors.Is(e, ErrRateLimited) || e.SandboxID != "orig" || !strings.Contains(e.Error(), "maximum number of concurrent") {
		t.Fatalf("second %+v", res[1])
	}
	if res[2].Error == nil || res[2].Error.Status != 500 {
		t.Fatalf("third %+v", res[2])
	}
}

func TestSandboxIDValidation(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	ctx := cpCtx(t)
	for _, bad := range []string{"", "ABC", "../sandboxes", "a/b", "a?b=c", "a-b-c", "id with space", "a%2Fb"} {
		if _, err := c.GetSandbox(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %v", bad, err)
		}
		if err := c.KillSandbox(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("kill %q: %v", bad, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests for invalid IDs", n)
	}
	// The legacy composite form names the sandbox before the dash.
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	if _, err := c.GetSandbox(ctx, rec.ID+"-6532622b"); err != nil {
		t.Fatal(err)
	}
	if p := srv.Requests()[0].Path; p != "/sandboxes/"+rec.ID {
		t.Fatalf("path %s", p)
	}
}

func TestUnauthorized(t *testing.T) {
	srv, err := e2btest.New(e2btest.Options{APIKeys: []string{cpOther}, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := cpClient(t, srv.URL())
	_, err = c.ListSandboxes(cpCtx(t), ListQuery{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || !errors.Is(err, ErrUnauthorized) ||
		ae.Message != "Invalid API key, please visit https://e2b.dev/docs/api-key for more information." {
		t.Fatalf("%v", err)
	}
	bad := cpClient(t, srv.URL(), func(cfg *Config) { cfg.APIKey = "not-a-key" })
	if _, err := bad.GetSandbox(cpCtx(t), "abc"); !errors.As(err, &ae) || ae.Message != "Invalid API key format" {
		t.Fatalf("%v", err)
	}
	srv.ResetRequests()
	none := cpClient(t, srv.URL(), func(cfg *Config) { cfg.APIKey = "" })
	if _, err := none.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no key: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests without a key", n)
	}
}

// TestCreateSandboxLifecycleWire: a lifecycle goes on the wire as E2B's SDK 2.51 sends lifecycle {onTimeout,
// autoResume}: pause is autoPause true with autoResume {"enabled": ...} and no autoPauseMemory (E2B's default keeps
// the memory); kill is autoPause false alone. GET /sandboxes/{id} answers the lifecycle back.
func TestCreateSandboxLifecycleWire(t *testing.T) {
	for _, tt := range []struct {
		onTimeout  string
		autoResume bool
		keys       []string
		body       string
		lifecycle  SandboxLifecycle
	}{
		{OnTimeoutPause, true, []string{"autoPause", "autoResume", "envVars", "metadata", "templateID", "timeout"},
			`"autoPause":true,"autoResume":{"enabled":true}`, SandboxLifecycle{AutoResume: true, OnTimeout: OnTimeoutPause}},
		{OnTimeoutPause, false, []string{"autoPause", "autoResume", "envVars", "metadata", "templateID", "timeout"},
			`"autoPause":true,"autoResume":{"enabled":false}`, SandboxLifecycle{OnTimeout: OnTimeoutPause}},
		{OnTimeoutKill, true, []string{"autoPause", "envVars", "metadata", "templateID", "timeout"},
			`"autoPause":false`, SandboxLifecycle{OnTimeout: OnTimeoutKill}},
	} {
		t.Run(tt.onTimeout, func(t *testing.T) {
			srv := cpEmulator(t)
			c := cpClient(t, srv.URL())
			sb, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base", Timeout: 300}.WithLifecycle(tt.onTimeout, tt.autoResume))
			if err != nil {
				t.Fatal(err)
			}
			r := srv.Requests()[0]
			if got := cpSortedKeys(cpBodyKeys(t, r.Body)); !slices.Equal(got, tt.keys) {
				t.Fatalf("body keys %v, want %v", got, tt.keys)
			}
			if !strings.Contains(string(r.Body), tt.body) {
				t.Fatalf("body %s lacks %s", r.Body, tt.body)
			}
			d, err := c.GetSandbox(cpCtx(t), sb.SandboxID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Lifecycle == nil || *d.Lifecycle != tt.lifecycle {
				t.Fatalf("lifecycle %+v, want %+v", d.Lifecycle, tt.lifecycle)
			}
		})
	}
}
