package e2b

import (
	"context"
	"net/http"
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
	// requests that carry its traffic access token (Sandbox.TrafficAccessToken, header TrafficTokenHeader).
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

// headerValues are the values of every header a rule sets: what error messages must never repeat.
func (n *Network) headerValues() []string {
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

// wire is n as sent in full: every field present, so that PUT clears what n leaves empty.
func (n *Network) wire() Network {
	w := Network{AllowOut: []string{}, DenyOut: []string{}, Rules: map[string][]NetworkRule{}}
	if n == nil {
		return w
	}
	w.AllowOut = append(w.AllowOut, n.AllowOut...)
	w.DenyOut = append(w.DenyOut, n.DenyOut...)
	for d, rules := range n.Rules {
		w.Rules[d] = slices.Clone(rules)
	}
	return w
}

// UpdateNetwork replaces a running sandbox's whole egress configuration with n (nil or empty: E2B's default,
// no limits and no rules). The header values n carries are never repeated in an error.
func (c *Client) UpdateNetwork(ctx context.Context, id string, n *Network) error {
	const op = "update sandbox network"
	id, err := c.checkSandboxID(op, id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, apiCall{op: op, method: http.MethodPut, path: "/sandboxes/" + id + "/network",
		body: n.wire(), idempotent: true, sandboxID: id, secrets: n.headerValues()}, http.StatusNoContent)
	return err
}
