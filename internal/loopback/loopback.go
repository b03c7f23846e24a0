// Package loopback tells a host of this machine alone: a loopback address, or localhost.
package loopback

import (
	"net/netip"
	"strings"
)

// Host reports whether host (a name or an address, an IPv6 one with or without brackets, no port) is a loopback
// address or localhost.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
