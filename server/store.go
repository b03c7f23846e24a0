package server

import (
	"io"
	"time"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// In a shared database the approvals are the document "approvals", and each request's call the document
// "approvals.d/ID", as in the state directory.
const (
	approvalsDocument = "approvals"
	approvalCalls     = "approvals.d/"
)

// pgApprovals keeps the approvals in documents of the database replicas share.
type pgApprovals struct {
	pg *state.Postgres
	*state.PostgresDocument
}

func (p pgApprovals) SaveCall(id string, data []byte) error {
	return p.pg.Document(approvalCalls + id).Put(data)
}
func (p pgApprovals) LoadCall(id string) ([]byte, error) {
	return p.pg.Document(approvalCalls + id).Get()
}
func (p pgApprovals) DropCalls(keep []string) { _ = p.pg.DropDocuments(approvalCalls, keep) }

// approvalsOf opens the approvals that go with store: a document in its database when it is PostgreSQL (so
// that an approval granted through any replica is honoured by all), else the file in stateDir.
func approvalsOf(store state.Store, stateDir string, now func() time.Time) (*policy.Approvals, error) {
	if pg, ok := store.(*state.Postgres); ok {
		return policy.OpenApprovalsIn(pgApprovals{pg, pg.Document(approvalsDocument)}, ApprovalTTL, now)
	}
	return policy.OpenApprovals(stateDir, ApprovalTTL, now)
}

// OpenApprovals opens the approvals of a server with this state directory and --store, for the approve
// command; Close the returned closer when done.
func OpenApprovals(stateDir, store string, now func() time.Time) (*policy.Approvals, io.Closer, error) {
	if store == "" {
		a, err := policy.OpenApprovals(stateDir, ApprovalTTL, now)
		return a, io.NopCloser(nil), err
	}
	if err := CheckStoreURL(store); err != nil {
		return nil, nil, err
	}
	pg, err := state.OpenPostgres(store, state.Options{Keys: state.NoDataKey("this command reads no sealed secrets")})
	if err != nil {
		return nil, nil, err
	}
	a, err := approvalsOf(pg, stateDir, now)
	if err != nil {
		pg.Close()
		return nil, nil, err
	}
	return a, pg, nil
}
