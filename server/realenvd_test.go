package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// startRealEnvd starts E2B's own envd (../shared/envd beside the repository) for the test, or skips the test,
// saying why, where the daemon is absent or cannot run here (in CI, where it is present, that fails the test).
func startRealEnvd(t *testing.T) *e2btest.RealEnvd {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := e2btest.StartRealEnvd(ctx, nil)
	if errors.Is(err, e2btest.ErrNoRealEnvd) {
		why := "not run against the real envd: " + err.Error()
		if e2btest.RealEnvdExpected() {
			optional.Missing(t, why)
		}
		optional.Skip(t, why)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}
