package emulator

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSnapshots(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	orig := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "envVars": map[string]string{"A": "1"}})["sandboxID"].(string)
	sb, _ := s.Sandbox(orig)
	if err := os.WriteFile(filepath.Join(sb.Dir, "home", "work.txt"), []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}

	a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{})
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	a.json(t, &snap)
	if a.status != 201 || !strings.HasSuffix(snap.SnapshotID, ":default") || snap.Names == nil || len(snap.Names) != 0 {
		t.Fatalf("snapshot: %d %s", a.status, a.body)
	}
	if !strings.Contains(string(a.body), `"names":[]`) {
		t.Fatalf("names must be an array: %s", a.body)
	}
	// The snapshot is a copy: later changes do not reach it.
	if err := os.WriteFile(filepath.Join(sb.Dir, "home", "work.txt"), []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := cpCreate(t, s, cpKeyA, map[string]any{"templateID": snap.SnapshotID})
	child, _ := s.Sandbox(m["sandboxID"].(string))
	if data, err := os.ReadFile(filepath.Join(child.Dir, "home", "work.txt")); err != nil || string(data) != "v1" {
		t.Fatalf("from snapshot: %q %v", data, err)
	}
	if child.EnvVars["A"] != "1" || child.TemplateID != strings.TrimSuffix(snap.SnapshotID, ":default") {
		t.Fatalf("child %+v", child)
	}
	// Another team cannot use it.
	a = cpCall(t, s, "POST", "/sandboxes", cpKeyB, map[string]any{"templateID": snap.SnapshotID})
	if a.status != 403 {
		t.Fatalf("other team: %d %s", a.status, a.body)
	}

	// Named.
	a = cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{"name": "my-snap"})
	var named struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	a.json(t, &named)
	slug := teamSlug(cpKeyA)
	if named.SnapshotID != slug+"/my-snap:default" || !slices.Equal(named.Names, []string{slug + "/my-snap"}) {
		t.Fatalf("named: %s", a.body)
	}
	for _, ref := range []string{"my-snap", slug + "/my-snap", named.SnapshotID} {
		if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": ref}); a.status != 201 {
			t.Errorf("create from %q: %d %s", ref, a.status, a.body)
		}
	}
	if a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{"name": "other-team/x"}); a.status != 400 {
		t.Fatalf("foreign namespace: %d", a.status)
	}
	if a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, nil); a.status != 400 {
		t.Fatalf("no body: %d", a.status)
	}

	// Listing, newest first, filtered by sandbox, paged.
	var list []map[string]any
	cpCall(t, s, "GET", "/snapshots", cpKeyA, nil).json(t, &list)
	if len(list) != 2 || list[0]["snapshotID"] != named.SnapshotID || list[1]["snapshotID"] != snap.SnapshotID {
		t.Fatalf("list %v", list)
	}
	cpCall(t, s, "GET", "/snapshots?sandboxID="+child.ID, cpKeyA, nil).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("filtered %v", list)
	}
	a = cpCall(t, s, "GET", "/snapshots?limit=1", cpKeyA, nil)
	a.json(t, &list)
	tok := a.header.Get("X-Next-Token")
	if len(list) != 1 || tok == "" {
		t.Fatalf("page: %d %q", len(list), tok)
	}
	a = cpCall(t, s, "GET", "/snapshots?limit=1&nextToken="+url.QueryEscape(tok), cpKeyA, nil)
	a.json(t, &list)
	if len(list) != 1 || list[0]["snapshotID"] != snap.SnapshotID || a.header.Get("X-Next-Token") != "" {
		t.Fatalf("page 2: %v", list)
	}

	// Delete, with the ID escaped as one path segment (quote(id, safe="")).
	if a := cpCall(t, s, "DELETE", "/templates/"+strings.ReplaceAll(strings.ReplaceAll(named.SnapshotID, "/", "%2F"), ":", "%3A"), cpKeyB, nil); a.status != 404 {
		t.Fatalf("delete by other team: %d", a.status)
	}
	if a := cpCall(t, s, "DELETE", "/templates/"+strings.ReplaceAll(strings.ReplaceAll(named.SnapshotID, "/", "%2F"), ":", "%3A"), cpKeyA, nil); a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	a = cpCall(t, s, "DELETE", "/templates/"+url.PathEscape(snap.SnapshotID), cpKeyA, nil)
	if a.status != 204 {
		t.Fatalf("delete unnamed: %d", a.status)
	}
	a = cpCall(t, s, "DELETE", "/templates/"+url.PathEscape(snap.SnapshotID), cpKeyA, nil)
	if _, msg := a.errorBody(t); a.status != 404 || !strings.Contains(msg, "not found") {
		t.Fatalf("delete twice: %d %q", a.status, msg)
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": snap.SnapshotID}); a.status != 404 {
		t.Fatalf("create from deleted: %d", a.status)
	}
	// A paused sandbox is not snapshotted (E2B checkpoints live sandboxes only).
	cpCall(t, s, "POST", "/sandboxes/"+orig+"/pause", cpKeyA, nil)
	if a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{}); a.status != 404 {
		t.Fatalf("snapshot of paused: %d", a.status)
	}
}

func TestFork(t *testing.T) {
	s := newCPServer(t, Options{})
	orig, _ := s.CreateSandbox(cpKeyA, SandboxOptions{Secure: true, Metadata: map[string]string{"m": "1"}})
	if err := os.WriteFile(filepath.Join(orig.Dir, "home", "state"), []byte("forked"), 0o640); err != nil {
		t.Fatal(err)
	}
	a := cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, map[string]any{"count": 2, "timeout": 60})
	var results []struct {
		Sandbox *struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
		Error any `json:"error"`
	}
	a.json(t, &results)
	if a.status != 201 || len(results) != 2 {
		t.Fatalf("fork: %d %s", a.status, a.body)
	}
	for _, r := range results {
		if r.Sandbox == nil || r.Error != nil || r.Sandbox.SandboxID == orig.ID || r.Sandbox.EnvdAccessToken == "" ||
			r.Sandbox.EnvdAccessToken == orig.AccessToken {
			t.Fatalf("result %+v", r)
		}
		f, _ := s.Sandbox(r.Sandbox.SandboxID)
		data, err := os.ReadFile(filepath.Join(f.Dir, "home", "state"))
		if err != nil || string(data) != "forked" || f.Metadata["m"] != "1" || f.EndAt.Sub(f.StartedAt) != time.Minute {
			t.Fatalf("fork %+v: %q %v", f, data, err)
		}
	}
	if got, _ := s.Sandbox(orig.ID); got.State != StateRunning {
		t.Fatalf("original %s", got.State)
	}
	// Default count is 1; limits as E2B's.
	a = cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, nil)
	if a.json(t, &results); a.status != 201 || len(results) != 1 {
		t.Fatalf("default fork: %d %s", a.status, a.body)
	}
	for body, msg := range map[string]string{`{"count":0}`: "Count must be at least 1", `{"count":101}`: "Count cannot be greater than 100",
		`{"timeout":0}`: "Timeout must be greater than 0"} {
		a := cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, body)
		if _, got := a.errorBody(t); a.status != 400 || got != msg {
			t.Errorf("%s: %d %q", body, a.status, got)
		}
	}
	cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/pause", cpKeyA, nil)
	a = cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, nil)
	if _, msg := a.errorBody(t); a.status != 409 || msg != "Sandbox '"+orig.ID+"' is paused and cannot be forked; resume it first" {
		t.Fatalf("fork paused: %d %q", a.status, msg)
	}
}
