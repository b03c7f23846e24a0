package tools

import (
	"errors"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// The limits of the policy file (its limits section) are enforced here, before anything reaches E2B: a create,
// fork or resume that the owner's limits refuse costs nothing. The caps on live and running sandboxes are held
// in the store (state.ReserveSandboxes): a call takes its places before it asks E2B, and gives them back once the
// new sandboxes are recorded (from then on their records count) or E2B failed. Places whose holder died run out
// after reservationHold.

// reservationHold bounds how long a place is held without the call giving it back: longer than any create, fork
// or resume takes at E2B.
const reservationHold = 10 * time.Minute

// limits are the owner's limits of the policy in force.
func (b *base) limits(owner string) policy.Limits {
	if b.limitsOf == nil {
		return policy.Limits{}
	}
	return b.limitsOf(owner)
}

// checkNew refuses a new sandbox of template with timeout seconds that the owner's limits do not allow.
func (b *base) checkNew(call Caller, template string, timeout int) error {
	if why := b.limits(call.Owner).CheckNew(template, timeout); why != "" {
		return userErrorf("Refused by this server's limits: %s.", why)
	}
	return nil
}

// checkTimeout refuses a timeout of seconds beyond the owner's limits.
func (b *base) checkTimeout(call Caller, seconds int) error {
	if why := b.limits(call.Owner).CheckTimeout(seconds); why != "" {
		return userErrorf("Refused by this server's limits: %s.", why)
	}
	return nil
}

// places are what a call holds in its owner's caps (none when the owner's limits set no cap).
type places struct {
	b    *base
	res  *state.Reservation
	once sync.Once
	// warning says which sandbox-hours budget the owner has used 80 % or more of ("" when none), for the result.
	warning string
}

// reserve takes n places of kind in the caller's caps, or refuses with a message naming the cap, the use and
// what frees a place; it refuses all new work while a sandbox-hours budget is used up. An owner whose limits
// set no cap takes no place (and writes nothing).
func (b *base) reserve(call Caller, kind state.SlotKind, n int) (*places, error) {
	return b.reserveCaps(call, kind, n, "")
}

// reserveForks is reserve for n forks of sandbox src, held to forks_per_sandbox too.
func (b *base) reserveForks(call Caller, src string, n int) (*places, error) {
	return b.reserveCaps(call, state.SlotNew, n, src)
}

func (b *base) reserveCaps(call Caller, kind state.SlotKind, n int, forkOf string) (*places, error) {
	l := b.limits(call.Owner)
	warning, err := b.checkHours(call, l)
	if err != nil {
		return nil, err
	}
	caps := state.SandboxCaps{Live: l.LiveSandboxes, Running: l.RunningSandboxes}
	if forkOf != "" && l.ForksPerSandbox > 0 {
		caps.Forks, caps.ForkOf = l.ForksPerSandbox, forkOf
	}
	if caps == (state.SandboxCaps{}) {
		return &places{b: b, warning: warning}, nil
	}
	r, err := b.store.ReserveSandboxes(call.Owner, kind, n, caps, reservationHold)
	var capErr *state.CapError
	if errors.As(err, &capErr) {
		return nil, capRefusal(capErr)
	}
	if err != nil {
		return nil, userErrorf("Could not check this owner's sandbox limits: %v", err)
	}
	return &places{b: b, res: &r, warning: warning}, nil
}

// checkHours refuses new work of an owner who has used up a sandbox-hours budget, and otherwise says which
// budgets are 80 % used or more.
func (b *base) checkHours(call Caller, l policy.Limits) (warning string, err error) {
	if !l.HasHours() {
		return "", nil
	}
	u, _, err := lifecycle.HoursUse(b.store, call.Owner, b.now())
	if err != nil {
		return "", userErrorf("Could not check this owner's sandbox-hours: %v", err)
	}
	if why := l.HoursUsedUp(u); why != "" {
		return "", userErrorf("Refused by this server's limits: %s: the owner's sandboxes were paused with their "+
			"files, and can be resumed then.", why)
	}
	return l.HoursWarning(u), nil
}

// hoursUsedUp says which of the owner's sandbox-hours budgets is used up, and when it resets
// (policy.Limits.HoursUsedUp); "" when none is, or when the owner's use cannot be read (which is logged).
func (b *base) hoursUsedUp(owner string) string {
	l := b.limits(owner)
	if !l.HasHours() {
		return ""
	}
	u, _, err := lifecycle.HoursUse(b.store, owner, b.now())
	if err != nil {
		b.log.Warn("reading sandbox-hours", "owner", owner, "err", err)
		return ""
	}
	return l.HoursUsedUp(u)
}

// record stores a new sandbox's record in one of the places: from then on the record counts instead.
func (p *places) record(rec state.SandboxRecord) error {
	if p.res == nil {
		return p.b.store.PutSandbox(rec)
	}
	return p.b.store.PutReservedSandbox(*p.res, rec)
}

// update changes a resumed sandbox's record in one of the places (see state.UpdateReservedSandbox): from then on
// the running record counts instead.
func (p *places) update(owner, id string, fn func(*state.SandboxRecord) error) (state.SandboxRecord, error) {
	if p.res == nil {
		return p.b.store.UpdateSandbox(owner, id, fn)
	}
	return p.b.store.UpdateReservedSandbox(*p.res, owner, id, fn)
}

// release gives back the places not used (after a failure at E2B, or a resume recorded); it may be called more
// than once.
func (p *places) release() {
	if p.res == nil {
		return
	}
	p.once.Do(func() {
		if err := p.b.store.ReleaseReservation(*p.res); err != nil {
			// The places run out after reservationHold on their own.
			p.b.log.Warn("giving back places in an owner's sandbox caps", "owner", p.res.Owner, "err", err)
		}
	})
}

// capRefusal words a refused reservation: "3 of 3 running sandboxes: pause or delete one (e2b_list_sandboxes)".
func capRefusal(e *state.CapError) error {
	free := "pause or delete one (e2b_list_sandboxes lists them, e2b_manage_sandbox pauses or deletes)"
	switch {
	case e.Limit == state.LimitLive:
		free = "delete one; a paused sandbox counts too (e2b_list_sandboxes lists them, e2b_manage_sandbox deletes)"
	case e.Limit != state.LimitRunning:
		free = "delete one of those forks; a paused one counts too (e2b_list_sandboxes lists them, " +
			"e2b_manage_sandbox deletes)"
	}
	if e.Asked > 1 {
		return userErrorf("Refused by this server's limits: %s, and this call asks for %d more: %s, or ask for fewer.",
			e.Error(), e.Asked, free)
	}
	return userErrorf("Refused by this server's limits: %s: %s.", e.Error(), free)
}
