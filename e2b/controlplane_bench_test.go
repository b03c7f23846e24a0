package e2b

import (
	"context"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

func cpBenchSetup(b *testing.B) (*e2btest.Server, *Client) {
	b.Helper()
	srv, err := e2btest.New(e2btest.Options{ExpiryInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	c, err := NewClient(Config{APIKey: cpKey, APIURL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	return srv, c
}

// BenchmarkCreateSandbox measures a create through the client against the emulator (request tagging, JSON both
// ways, the emulator seeding a sandbox directory).
func BenchmarkCreateSandbox(b *testing.B) {
	srv, c := cpBenchSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sb, err := c.CreateSandbox(ctx, NewSandbox{TemplateID: "base", Metadata: map[string]string{"e2b-mcp": "true"}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		srv.Vanish(sb.SandboxID)
		b.StartTimer()
	}
}

// BenchmarkListSandboxes1000 lists 1000 sandboxes: ten pages of 100 followed through X-Next-Token.
func BenchmarkListSandboxes1000(b *testing.B) {
	srv, c := cpBenchSetup(b)
	for range 1000 {
		if _, err := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{"e2b-mcp.session_id": "bench"}}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	q := ListQuery{Metadata: map[string]string{"e2b-mcp.session_id": "bench"}}
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.ListSandboxes(ctx, q)
		if err != nil || len(got) != 1000 {
			b.Fatalf("%d %v", len(got), err)
		}
	}
}
