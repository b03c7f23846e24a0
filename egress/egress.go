// Package egress decides a sandbox's egress configuration: the operator's limits on where sandboxes may connect
// (an allow-list, a deny-list, or no internet at all) and the header rules of the owner's registered credentials,
// put together as the complete configuration E2B applies (create's network, PUT /sandboxes/{id}/network). The
// model never chooses any of it: nothing here is read from a tool argument.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Limits are the operator's limits on where sandboxes may connect.
type Limits struct {
	// AllowOut, when not empty, is an allow-list: domains (github.com, *.example.com), IPs or CIDRs; everything
	// else is denied.
	AllowOut []string
	// DenyOut are IPs or CIDRs sandboxes may not reach.
	DenyOut []string
	// NoInternet denies every destination not in AllowOut.
	NoInternet bool
}

// Policy is the server's egress policy: its limits and which of an owner's credentials its sandboxes get.
type Policy struct {
	Limits Limits
	// Credentials names the credentials sandboxes get; nil means all of the owner's, empty none. A name the
	// owner has not registered is passed over.
	Credentials []string
	// Store holds the credentials (the OS keyring or the encrypted key store); nil means none.
	Store credentials.SecretStore
	// Owners are scopes of an egress file: an owner's, or one of its sessions', limits and credentials where they
	// differ from the above.
	Owners map[string]OwnerScope
}

// Check validates the limits, as E2B would: domains only in AllowOut, IPs or CIDRs anywhere.
func (l Limits) Check() error {
	for _, a := range l.AllowOut {
		if isAddress(a) {
			continue
		}
		if _, err := credentials.NormalizeDomain(a); err != nil {
			return fmt.Errorf("allow-out %q is neither an IP, a CIDR nor a domain", a)
		}
	}
	for _, d := range l.DenyOut {
		if !isAddress(d) {
			return fmt.Errorf("deny-out %q is not an IP or a CIDR (E2B denies by address only)", d)
		}
	}
	return nil
}

func isAddress(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// Applied is one credential in force in a sandbox: its name and domain, never its value.
type Applied struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
}

// Config is one sandbox's complete egress configuration and what may be said of it.
type Config struct {
	// Network is sent to E2B; nil when it restricts nothing and sets no header.
	Network *e2b.Network
	// Summary names what is in force, for the model and for people: no value.
	Summary Summary
}

// Summary is what a sandbox's result says of its egress: the credentials by name and domain, and the limits.
type Summary struct {
	Credentials []Applied `json:"credentials"`
	// AllowOut is the allow-list when there is one: everything else is denied.
	AllowOut []string `json:"allow_out,omitempty"`
	DenyOut  []string `json:"deny_out,omitempty"`
	// Internet is false when the sandbox may reach nothing beyond AllowOut.
	Internet bool `json:"internet"`
}

// Resolve builds the egress configuration of a sandbox of owner's session from the owner's credentials as they
// are now (so a rotated value takes effect at the next create or resume), within the limits of the most specific
// scope. A p of nil yields the empty configuration.
func (p *Policy) Resolve(owner, session string) (Config, error) {
	cfg := Config{Summary: Summary{Credentials: []Applied{}, Internet: true}}
	if p == nil {
		return cfg, nil
	}
	n := &e2b.Network{Rules: map[string][]e2b.NetworkRule{}}
	l, chosen := p.scoped(owner, session)
	switch {
	case len(l.AllowOut) > 0 || l.NoInternet:
		n.AllowOut = slices.Clone(l.AllowOut)
		n.DenyOut = []string{e2b.AllTraffic}
		cfg.Summary.Internet = false
	case len(l.DenyOut) > 0:
		n.DenyOut = slices.Clone(l.DenyOut)
	}
	cfg.Summary.AllowOut = n.AllowOut
	if len(l.DenyOut) > 0 {
		cfg.Summary.DenyOut = slices.Clone(l.DenyOut)
	}
	if p.Store != nil && (chosen == nil || len(chosen) > 0) {
		list, err := credentials.Credentials(p.Store, owner)
		if err != nil {
			return Config{}, err
		}
		for _, c := range list {
			if chosen != nil && !slices.Contains(chosen, c.Name) {
				continue
			}
			v, err := credentials.CredentialValue(p.Store, owner, c)
			if errors.Is(err, credentials.ErrNoCredential) {
				continue // removed since it was listed
			}
			if err != nil {
				return Config{}, err
			}
			addHeader(n, c.Domain, c.Header, c.HeaderValue(v))
			cfg.Summary.Credentials = append(cfg.Summary.Credentials, Applied{Name: c.Name, Domain: c.Domain})
		}
	}
	if !n.Empty() {
		cfg.Network = n
	}
	return cfg, nil
}

// addHeader sets one header of a domain's rule; each domain has one rule holding all of its headers.
func addHeader(n *e2b.Network, domain, header, value string) {
	rules := n.Rules[domain]
	if len(rules) == 0 {
		rules = []e2b.NetworkRule{{Transform: e2b.NetworkTransform{Headers: map[string]string{}}}}
	}
	rules[0].Transform.Headers[header] = value
	n.Rules[domain] = rules
}

// Describe says in one line where sandboxes may connect, for the server's start-up log.
func (l Limits) Describe() string {
	var parts []string
	switch {
	case len(l.AllowOut) > 0:
		parts = append(parts, "only "+strings.Join(l.AllowOut, ", "))
	case l.NoInternet:
		parts = append(parts, "no internet")
	default:
		parts = append(parts, "internet")
	}
	if len(l.DenyOut) > 0 {
		parts = append(parts, "denied "+strings.Join(l.DenyOut, ", "))
	}
	return strings.Join(parts, "; ")
}

// Source resolves the egress configuration of an owner's sandboxes (a *Policy).
type Source interface {
	Resolve(owner, session string) (Config, error)
}

// Apply gives a running sandbox the complete egress configuration of its owner as it is now. E2B's update
// replaces the whole configuration, so what the owner no longer has (a removed credential, an old value) goes.
func Apply(ctx context.Context, c *e2b.Client, src Source, owner, session, sandboxID string) (Summary, error) {
	cfg, err := src.Resolve(owner, session)
	if err != nil {
		return Summary{}, err
	}
	return cfg.Summary, c.UpdateNetwork(ctx, sandboxID, cfg.Network)
}

// OnAdopt is the lifecycle.AdoptHook that gives each running sandbox a reconciliation adopts its owner's egress
// configuration (E2B knows the sandbox but the server never configured it). Failures are logged: the adoption
// stands either way. A nil src gives a hook that does nothing.
func OnAdopt(c *e2b.Client, src Source, log *slog.Logger) func(context.Context, state.SandboxRecord) {
	return func(ctx context.Context, rec state.SandboxRecord) {
		if src == nil || rec.State != state.StateRunning {
			return
		}
		if _, err := Apply(ctx, c, src, rec.Owner, rec.Session, rec.ID); err != nil {
			log.Warn("applying the egress configuration to an adopted sandbox", "sandbox", rec.ID, "owner",
				rec.Owner, "error", err)
		}
	}
}
