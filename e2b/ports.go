package e2b

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
)

// TrafficTokenHeader carries a sandbox's traffic access token to its ports, which a sandbox created with network
// allowPublicTraffic false requires of every request.
const TrafficTokenHeader = "E2b-Traffic-Access-Token"

// PortURL is where a browser reaches port of the sandbox: https://<port>-<id>.<domain>, as E2B's edge serves
// every port. With a sandbox URL on this machine (the emulator), it is the same host form under localhost at that
// address's port, which browsers resolve to the loopback address.
func (e *Envd) PortURL(port int) string {
	if u, ok := e.loopbackSandboxURL(); ok {
		return fmt.Sprintf("%s://%d-%s.localhost:%s", u.Scheme, port, e.conn.ID, u.Port())
	}
	domain := e.conn.Domain
	if domain == "" {
		domain = e.client.cfg.Domain
	}
	return fmt.Sprintf("https://%d-%s.%s", port, e.conn.ID, domain)
}

// PortTarget is where a proxy sends requests for port of the sandbox: the base URL, and the headers that route
// them there (with a configured sandbox URL, as envd's requests are routed).
func (e *Envd) PortTarget(port int) (*url.URL, http.Header) {
	h := http.Header{}
	if e.client.cfg.SandboxURL != "" {
		u, err := url.Parse(e.client.cfg.SandboxURL)
		if err == nil {
			h.Set("E2b-Sandbox-Id", e.conn.ID)
			h.Set("E2b-Sandbox-Port", strconv.Itoa(port))
			return u, h
		}
	}
	u, _ := url.Parse(e.PortURL(port)) // made of a checked ID and domain: it parses
	return u, h
}

// loopbackSandboxURL is the configured sandbox URL when it addresses this machine.
func (e *Envd) loopbackSandboxURL() (*url.URL, bool) {
	if e.client.cfg.SandboxURL == "" {
		return nil, false
	}
	u, err := url.Parse(e.client.cfg.SandboxURL)
	if err != nil || u.Port() == "" {
		return nil, false
	}
	if h := u.Hostname(); h == "localhost" {
		return u, true
	} else if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return u, true
	}
	return nil, false
}
