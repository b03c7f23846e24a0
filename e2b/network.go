package e2b

import (
	"context"
	"net/http"
	"slices"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// The egress configuration's types are E2B's wire types (package wire), which the emulator reads too.
type (
	Network          = wire.Network
	NetworkRule      = wire.NetworkRule
	NetworkTransform = wire.NetworkTransform
)

// AllTraffic is the CIDR that stands for every IPv4 destination (wire.AllTraffic).
const AllTraffic = wire.AllTraffic

// sentWhole is n as PUT sends it: every field present, so that the update clears what n leaves empty.
func sentWhole(n *Network) Network {
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
		body: sentWhole(n), idempotent: true, sandboxID: id, secrets: n.HeaderValues()}, http.StatusNoContent)
	return err
}
