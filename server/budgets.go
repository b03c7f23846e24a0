package server

import (
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// budgetInterval is the time between two looks at the owners' sandbox-hours budgets: how long past a used-up
// budget an owner's sandboxes may run on, at most, before they are paused.
const budgetInterval = time.Minute

// budgetTool names the pauses of a used-up sandbox-hours budget in the audit log, where tool calls have the tool.
const budgetTool = "e2b-mcp budget"

// recordBudgetPause writes the pause of a sandbox whose owner used up a sandbox-hours budget to the audit log.
func (s *Server) recordBudgetPause(rec state.SandboxRecord, usedUp string) {
	err := s.audit.Record(audit.Entry{Time: s.cfg.Now().UTC(), Owner: rec.Owner, Session: rec.Session,
		Tool: budgetTool, Args: map[string]any{"action": "pause", "limit": usedUp}, Decision: "limit",
		Outcome: audit.OutcomeOK, SandboxID: rec.ID})
	if err != nil {
		s.log.Error("recording a sandbox paused for its owner's budget", "sandbox", rec.ID, "owner", rec.Owner,
			"error", err)
	}
}
