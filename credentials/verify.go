package credentials

import (
	"context"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// verifyTimeout bounds the call that checks a new key with E2B.
const verifyTimeout = 30 * time.Second

// authCheckFilter is a metadata filter no sandbox carries: listing with it is one cheap authenticated request
// that returns an empty page, however many sandboxes the team has.
var authCheckFilter = map[string]string{"e2b-mcp.auth-check": "none"}

// VerifyAPIKey checks cfg.APIKey with one cheap authenticated call to E2B, retried at most once. A key E2B
// refuses is an error wrapping e2b.ErrUnauthorized.
func VerifyAPIKey(ctx context.Context, cfg e2b.Config) error {
	cfg.MaxRetries = 1
	cfg.RetryWaitMax = time.Second
	c, err := e2b.NewClient(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	_, err = c.ListSandboxes(ctx, e2b.ListQuery{Metadata: authCheckFilter, PageSize: 1})
	return err
}
