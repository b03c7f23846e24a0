package e2b

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const netSecret = "Basic eC1hY2Nlc3MtdG9rZW46Z2hwX3NlY3JldHNlY3JldA=="

func githubRule() *Network {
	return &Network{
		AllowOut: []string{"github.com"}, DenyOut: []string{AllTraffic},
		Rules: map[string][]NetworkRule{"github.com": {{Transform: NetworkTransform{Headers: map[string]string{"Authorization": netSecret}}}}},
	}
}

// PUT /sandboxes/{id}/network replaces everything, so every field is sent, empty ones as empty: a nil Network
// clears the sandbox's whole configuration.
func TestUpdateNetworkSendsTheWholeConfiguration(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/sandboxes/abc123/network" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := cpClient(t, srv.URL)
	if err := c.UpdateNetwork(cpCtx(t), "abc123", githubRule()); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateNetwork(cpCtx(t), "abc123", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"allowOut":["github.com"],"denyOut":["0.0.0.0/0"],"rules":{"github.com":[{"transform":{"headers":{"Authorization":"` + netSecret + `"}}}]}}`,
		`{"allowOut":[],"denyOut":[],"rules":{}}`,
	}
	if len(bodies) != 2 || bodies[0] != want[0] || bodies[1] != want[1] {
		t.Fatalf("bodies:\n%s\nwant:\n%s", strings.Join(bodies, "\n"), strings.Join(want, "\n"))
	}
}

// A server (or a proxy in front of it) that echoes the request in its error must not bring a header value into
// the error, whether the call was a create or a network update.
func TestNetworkSecretsNeverInErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		msg, _ := json.Marshal(map[string]any{"code": 400, "message": "bad request: " + string(b)})
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(msg)
	}))
	defer srv.Close()
	c := cpClient(t, srv.URL)
	errs := map[string]error{
		"update": c.UpdateNetwork(cpCtx(t), "abc123", githubRule()),
	}
	_, errs["create"] = c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base", Network: githubRule()})
	for name, err := range errs {
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Fatalf("%s: want a 400 APIError, got %v", name, err)
		}
		if strings.Contains(err.Error(), netSecret) || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("%s: error does not hide the header value: %v", name, err)
		}
	}
}

func TestCreateSendsNetworkOnlyWhenGiven(t *testing.T) {
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		bodies = append(bodies, m)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"sandboxID":"abc123","templateID":"base","clientID":"x","envdVersion":"0.6.13"}`)
	}))
	defer srv.Close()
	c := cpClient(t, srv.URL)
	for _, n := range []*Network{nil, githubRule()} {
		if _, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base", Network: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, has := bodies[0]["network"]; has {
		t.Errorf("a create without a network sent one: %v", bodies[0])
	}
	got, _ := json.Marshal(bodies[1]["network"])
	if !strings.Contains(string(got), `"allowOut":["github.com"]`) || !strings.Contains(string(got), `"Authorization"`) {
		t.Errorf("create's network: %s", got)
	}
}
