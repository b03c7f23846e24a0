// Package wire holds the JSON bodies of E2B's API that both ends of this module speak: the e2b client sends and
// reads them, the emulator (e2b/emulator) reads and answers them. Defined once, the two cannot drift apart, as
// E2B's own SDKs and server share one generated schema. The package imports nothing of the module, so that the
// client, whose tests import the emulator, and the emulator can both import it.
package wire

import (
	"maps"
	"slices"
)

// AllTraffic is the CIDR that stands for every IPv4 destination: denyOut [AllTraffic] is no internet access, and
// with allowOut it makes an allow-list (allowOut wins over denyOut at E2B).
const AllTraffic = "0.0.0.0/0"

// Network is a sandbox's egress configuration: create's network (SandboxNetworkConfig) and the body of PUT
// /sandboxes/{id}/network, which replaces the whole configuration (a field left out is cleared).
type Network struct {
	// AllowOut are destinations the sandbox may reach: CIDRs, IPs or domains (also *.example.com). E2B filters
	// domains by the Host header of HTTP on port 80 and the SNI of TLS on 443.
	AllowOut []string `json:"allowOut"`
	// DenyOut are CIDRs or IPs the sandbox may not reach (domains are not allowed here).
	DenyOut []string `json:"denyOut"`
	// Rules map a domain to the transforms E2B's egress proxy applies to the sandbox's HTTP and HTTPS requests
	// to it, outside the sandbox. A domain here is not thereby allowed: AllowOut and DenyOut decide that.
	Rules map[string][]NetworkRule `json:"rules"`
	// AllowPublicTraffic false (create only: the update leaves it out) makes the sandbox's ports answer only
	// requests that carry its traffic access token (header e2b-traffic-access-token); nil or true leaves them
	// public.
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
}

// NetworkRule is one egress rule of a domain.
type NetworkRule struct {
	Transform NetworkTransform `json:"transform"`
}

// NetworkTransform says what the egress proxy changes in a matching request: Headers are set, replacing any
// header of the same name the sandbox sent. A value may hold ${e2b.secrets.NAME}, which E2B replaces with the
// value of the team's secret NAME.
type NetworkTransform struct {
	Headers map[string]string `json:"headers"`
}

// Empty reports whether n restricts nothing and sets no header: E2B's default.
func (n *Network) Empty() bool {
	return n == nil || len(n.AllowOut) == 0 && len(n.DenyOut) == 0 && len(n.Rules) == 0
}

// Clone is a deep copy of n, nil for nil.
func (n *Network) Clone() *Network {
	if n == nil {
		return nil
	}
	c := &Network{AllowOut: slices.Clone(n.AllowOut), DenyOut: slices.Clone(n.DenyOut)}
	if n.AllowPublicTraffic != nil {
		v := *n.AllowPublicTraffic
		c.AllowPublicTraffic = &v
	}
	if n.Rules != nil {
		c.Rules = make(map[string][]NetworkRule, len(n.Rules))
	}
	for d, rules := range n.Rules {
		cr := make([]NetworkRule, len(rules))
		for i, r := range rules {
			cr[i].Transform.Headers = maps.Clone(r.Transform.Headers)
		}
		c.Rules[d] = cr
	}
	return c
}

// HeaderValues are the values of every header a rule sets (secrets, often), non-empty ones only.
func (n *Network) HeaderValues() []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, rules := range n.Rules {
		for _, r := range rules {
			for _, v := range r.Transform.Headers {
				if v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}
