package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// A sandbox being started, made or forked: the request E2B gets, its network configuration, its record, and what
// is done when the record cannot be written.

// newSandbox is the request for a new sandbox of the caller's session, whether made or forked from a checkpoint:
// secure, so that its envd wants the access token only this server keeps, tagged, so that the server finds it
// again and E2B's dashboard shows whose it is, and with its owner's egress configuration.
func newSandbox(call Caller, template, title string, timeout int, env map[string]string,
	net egress.Config) e2b.NewSandbox {
	if env == nil {
		env = map[string]string{}
	}
	return e2b.NewSandbox{
		TemplateID: template,
		Timeout:    timeout,
		Secure:     true,
		Metadata:   lifecycle.Metadata(call.Owner, call.Session, title),
		EnvVars:    env,
		Network:    net.Network,
	}
}

// egressFor is the complete network configuration of the owner's new sandboxes as it is now: the egress
// configuration (credentials read afresh, so a rotated one takes effect at once), with public traffic off when
// previews are private. The error never holds a credential's value.
func (b *base) egressFor(ctx context.Context, call Caller) (egress.Config, error) {
	cfg := egress.Config{Summary: egress.Summary{Credentials: []egress.Applied{}, Internet: true}}
	if b.egress != nil {
		early, ok := earlyEgressOf(ctx, call)
		if ok {
			cfg = early
		} else {
			var err error
			if cfg, err = b.egress.Resolve(call.Owner, call.Session); err != nil {
				return cfg, userErrorf("Could not read the egress credentials of %s: %s", call.Owner,
					state.PublicText(err))
			}
		}
	}
	if b.previews != nil {
		// Only this server's proxy, which holds the traffic token, reaches the sandbox's ports.
		n := e2b.Network{}
		if cfg.Network != nil {
			n = *cfg.Network
		}
		private := false
		n.AllowPublicTraffic = &private
		cfg.Network = &n
	}
	return cfg, nil
}

// applyEgress gives a running sandbox the complete egress configuration of its owner (E2B's update replaces
// everything), as every path that brings a sandbox alive without a create must: resume, a live fork, adoption.
// Without an egress source nothing is sent. A failure comes back as a warning for the result: the sandbox runs,
// but may still have the rules it had before.
func (b *base) applyEgress(ctx context.Context, c *e2b.Client, call Caller, id string) (*egress.Summary, string) {
	if b.egress == nil {
		return nil, ""
	}
	summary, err := egress.Apply(ctx, c, b.egress, call.Owner, call.Session, id)
	if err != nil {
		b.log.Warn("applying the egress configuration", "sandbox", id, "owner", call.Owner, "session",
			call.Session, "err", err)
		return nil, fmt.Sprintf("The egress configuration of %s could not be brought up to date (%s); credentials changed "+
			"or removed since it last ran may still be in force in it, and new ones may be missing.", id, b.errorText(ctx,
			call, "egress", err))
	}
	return &summary, ""
}

// newRecord is the record of a sandbox just started for the caller, made or forked: running for timeout seconds,
// then paused or killed as onTimeout says, with the domain and envd access token it is reached by.
func (b *base) newRecord(call Caller, c *e2b.Client, sb *e2b.Sandbox, title, template string, timeout int,
	onTimeout string) state.SandboxRecord {
	conn := c.Conn(sb)
	now := b.now().UTC()
	b.extended.done(call.Owner, sb.SandboxID, now)
	return state.SandboxRecord{
		ID: sb.SandboxID, Owner: call.Owner, Session: call.Session, Title: title, Template: template,
		Domain: conn.Domain, EnvdVersion: sb.EnvdVersion, AccessToken: sb.EnvdAccessToken,
		State: state.StateRunning, Created: now, TimeoutSeconds: timeout,
		OnTimeout: onTimeout, ExpiresAt: now.Add(time.Duration(timeout) * time.Second),
	}
}

// unrecorded deletes a sandbox just started that the store could not record, and says so: no call could reach it,
// and adopting it writes to the same store (a replaced data key fails both), so it would run, billed, until its
// timeout.
func (b *base) unrecorded(ctx context.Context, c *e2b.Client, call Caller, tool, id string,
	timeout int, err error) string {
	b.log.Error("recording a new sandbox", "tool", tool, "sandbox", id, "err", err)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if kerr := c.KillSandbox(kctx, id); kerr != nil {
		return fmt.Sprintf("The sandbox %s was started but could not be recorded (%s), and deleting it failed too (%s): it "+
			"runs until its timeout of %d seconds.", id, state.PublicText(err), b.errorText(ctx, call, tool, kerr), timeout)
	}
	return fmt.Sprintf("The sandbox %s was started but could not be recorded (%s), so it was deleted again.", id,
		state.PublicText(err))
}
