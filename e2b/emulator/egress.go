package emulator

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// Egress: E2B's egress proxy, emulated. On E2B every connection a sandbox opens passes a proxy outside the VM
// that applies the sandbox's network configuration: allowOut and denyOut decide whether it may go out at all, and
// rules set headers on its HTTP requests to a domain, so that a token reaches the server while nothing inside the
// sandbox can read it.
//
// Emulated sandboxes have a loopback-only network of their own (see bwrap.go). Each gets one way out: a SOCKS5 proxy
// of the emulator on a Unix socket bound into the sandbox at egressSocket, named to programs by ALL_PROXY (curl,
// git and other libcurl programs honour it; socks5h, so that names are resolved by the proxy, outside). The proxy
// holds the configuration; the sandbox sees only the socket's path. Differences from E2B:
//   - only programs that use the proxy reach anything (on E2B the proxy is transparent);
//   - domains are matched on every port (E2B matches the Host header on port 80 and TLS SNI on 443);
//   - headers are set on plain HTTP only: a TLS connection passes through unchanged (E2B terminates TLS with a
//     certificate the sandbox trusts);
//   - the host's own addresses (loopback, private and link-local networks) are never reached, except names that
//     Options.Hosts maps, which is how tests put a server of this machine behind a domain.

// egressSocketDir is where the proxy's socket appears inside a sandbox; egressSocket is the socket itself.
const (
	egressSocketDir = "/run/e2b-egress"
	egressSocket    = egressSocketDir + "/proxy.sock"
)

// egressProxyURL is the ALL_PROXY value of every process.
const egressProxyURL = "socks5h://localhost" + egressSocket

// loopbackHosts is the NO_PROXY value of every process: the sandbox's own loopback, which the proxy (outside the
// sandbox) could not reach.
const loopbackHosts = "localhost,127.0.0.1,::1"

// checkNetwork refuses what E2B refuses: a domain in denyOut, an entry that is none of IP, CIDR or domain.
func checkNetwork(n *wire.Network) *apiError {
	if n == nil {
		return nil
	}
	for _, d := range n.DenyOut {
		if _, ok := parseAddrOrPrefix(d); !ok {
			return errorf(http.StatusBadRequest, "invalid denyOut entry %q: only IP addresses and CIDR blocks are allowed", d)
		}
	}
	for _, a := range n.AllowOut {
		if _, ok := parseAddrOrPrefix(a); !ok && !validDomainPattern(a) {
			return errorf(http.StatusBadRequest, "invalid allowOut entry %q", a)
		}
	}
	for d, rules := range n.Rules {
		if !validDomainPattern(d) {
			return errorf(http.StatusBadRequest, "invalid rule domain %q", d)
		}
		for _, r := range rules {
			for name, v := range r.Transform.Headers {
				if name == "" || strings.ContainsAny(name, " :\r\n") || strings.ContainsAny(v, "\r\n\x00") {
					return errorf(http.StatusBadRequest, "invalid header in the rule of %q", d)
				}
			}
		}
	}
	return nil
}

func parseAddrOrPrefix(s string) (netip.Prefix, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	p, err := netip.ParsePrefix(s)
	return p.Masked(), err == nil
}

func validDomainPattern(d string) bool {
	host := strings.TrimPrefix(strings.ToLower(d), "*.")
	return host != "" && !strings.ContainsAny(host, "/:* ") && strings.Contains(host, ".")
}

// matchDomain reports whether host is pattern or, for *.example.com, a subdomain of example.com.
func matchDomain(pattern, host string) bool {
	pattern = strings.ToLower(pattern)
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return host == pattern
}

// egressAllowed applies allowOut and denyOut as E2B does: an allowOut match wins, then a denyOut match denies,
// and anything else goes out.
func egressAllowed(n *wire.Network, host string, ip netip.Addr) bool {
	if n == nil {
		return true
	}
	for _, a := range n.AllowOut {
		if p, ok := parseAddrOrPrefix(a); ok {
			if p.Contains(ip) {
				return true
			}
		} else if host != "" && matchDomain(a, host) {
			return true
		}
	}
	for _, d := range n.DenyOut {
		if p, ok := parseAddrOrPrefix(d); ok && (p.Contains(ip) || d == wire.AllTraffic) {
			return false
		}
	}
	return true
}

// ruleHeaders are the headers the rules set on requests to host; an exact rule's header wins over a wildcard's.
func ruleHeaders(n *wire.Network, host string) map[string]string {
	if n == nil || host == "" {
		return nil
	}
	out := map[string]string{}
	for _, exact := range []bool{false, true} {
		for d, rules := range n.Rules {
			if strings.HasPrefix(d, "*.") == exact || !matchDomain(d, host) {
				continue
			}
			for _, r := range rules {
				for k, v := range r.Transform.Headers {
					out[k] = v
				}
			}
		}
	}
	return out
}

// egressProxies runs one proxy per sandbox, each on a socket in a directory of its own under dir.
type egressProxies struct {
	srv *Server

	mu        sync.Mutex
	dir       string // made on first use: a short path, as Unix socket paths are limited to 107 bytes
	listeners map[string]net.Listener
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

func newEgressProxies(s *Server) *egressProxies {
	return &egressProxies{srv: s, listeners: map[string]net.Listener{}, conns: map[net.Conn]struct{}{}}
}

// socketDir starts the sandbox's proxy if it is not running and returns the host directory that holds its
// socket, for binding at egressSocketDir.
func (e *egressProxies) socketDir(id string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return "", errors.New("emulator: the emulator is closed")
	}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "e2begress-")
		if err != nil {
			return "", err
		}
		e.dir = d
	}
	dir := filepath.Join(e.dir, id)
	if _, ok := e.listeners[id]; ok {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sock := filepath.Join(dir, filepath.Base(egressSocket))
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", fmt.Errorf("emulator: egress proxy: %w", err)
	}
	e.listeners[id] = ln
	e.wg.Go(func() { e.serve(id, ln) })
	return dir, nil
}

// stop ends a sandbox's proxy and the connections through it (a killed sandbox's connections end with it).
func (e *egressProxies) stop(id string) {
	e.mu.Lock()
	ln := e.listeners[id]
	delete(e.listeners, id)
	dir := e.dir
	e.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	if dir != "" {
		_ = os.RemoveAll(filepath.Join(dir, id))
	}
}

// close ends every proxy and connection and removes the sockets.
func (e *egressProxies) close() {
	e.mu.Lock()
	e.closed = true
	for _, ln := range e.listeners {
		ln.Close()
	}
	for c := range e.conns {
		c.Close()
	}
	e.listeners = map[string]net.Listener{}
	dir := e.dir
	e.mu.Unlock()
	e.wg.Wait()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

func (e *egressProxies) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

func (e *egressProxies) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	c.Close()
}

func (e *egressProxies) serve(id string, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !e.track(c) {
			c.Close()
			return
		}
		e.wg.Go(func() {
			defer e.untrack(c)
			e.handle(id, c)
		})
	}
}

// network is the sandbox's configuration now (a PUT applies to the next connection), and whether it runs.
func (e *egressProxies) network(id string) (*wire.Network, bool) {
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	sb := e.srv.sandboxes[id]
	if sb == nil || sb.State != StateRunning {
		return nil, false
	}
	return sb.Network.Clone(), true
}

// SOCKS5 (RFC 1928) replies.
const (
	socksOK          = 0x00
	socksFailure     = 0x01
	socksNotAllowed  = 0x02
	socksUnreachable = 0x04
	socksRefused     = 0x05
	socksNoCommand   = 0x07
	socksNoAddrType  = 0x08
)

const egressDialTimeout = 10 * time.Second

func (e *egressProxies) handle(id string, c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	host, port, code := socksRequest(br, c)
	if code != socksOK {
		socksReply(c, code)
		return
	}
	n, running := e.network(id)
	if !running {
		socksReply(c, socksFailure)
		return
	}
	ip, mapped, err := e.resolve(host)
	if err != nil {
		socksReply(c, socksUnreachable)
		return
	}
	name := host
	if _, err := netip.ParseAddr(host); err == nil {
		name = ""
	}
	if !egressAllowed(n, name, ip) || !mapped && !publicAddr(ip) {
		socksReply(c, socksNotAllowed)
		return
	}
	up, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, port).String(), egressDialTimeout)
	if err != nil {
		socksReply(c, socksRefused)
		return
	}
	if !e.track(up) {
		up.Close()
		return
	}
	defer e.untrack(up)
	socksReply(c, socksOK)
	_ = c.SetDeadline(time.Time{})
	if h := ruleHeaders(n, name); len(h) > 0 {
		if first, err := br.Peek(1); err == nil && first[0] != 0x16 { // 0x16 starts a TLS handshake
			forwardHTTP(br, c, up, h)
			return
		}
	}
	tunnel(io.MultiReader(br, c), c, up)
}

// resolve finds host's address: Options.Hosts first (mapped), then an IP literal, then DNS.
func (e *egressProxies) resolve(host string) (ip netip.Addr, mapped bool, err error) {
	if a, ok := e.srv.opts.Hosts[strings.ToLower(host)]; ok {
		ip, err = netip.ParseAddr(a)
		return ip, true, err
	}
	if ip, err = netip.ParseAddr(host); err == nil {
		return ip, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), egressDialTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, false, fmt.Errorf("no address for %s", host)
	}
	return ips[0].Unmap(), false, nil
}

// publicAddr is false for addresses of this machine and its networks, which a sandbox on E2B cannot reach.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

// socksRequest reads the greeting and the CONNECT request; it answers the greeting (no authentication).
func socksRequest(br *bufio.Reader, w io.Writer) (host string, port uint16, code byte) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 {
		return "", 0, socksFailure
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil || !slices.Contains(methods, 0) {
		_, _ = w.Write([]byte{5, 0xff})
		return "", 0, socksFailure
	}
	if _, err := w.Write([]byte{5, 0}); err != nil {
		return "", 0, socksFailure
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return "", 0, socksFailure
	}
	if req[1] != 1 { // CONNECT only
		return "", 0, socksNoCommand
	}
	switch req[3] {
	case 1, 4:
		b := make([]byte, 4)
		if req[3] == 4 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return "", 0, socksFailure
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.Unmap().String()
	case 3:
		l, err := br.ReadByte()
		if err != nil {
			return "", 0, socksFailure
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", 0, socksFailure
		}
		host = strings.TrimSuffix(strings.ToLower(string(b)), ".")
	default:
		return "", 0, socksNoAddrType
	}
	var p [2]byte
	if _, err := io.ReadFull(br, p[:]); err != nil {
		return "", 0, socksFailure
	}
	return host, binary.BigEndian.Uint16(p[:]), socksOK
}

func socksReply(w io.Writer, code byte) {
	_, _ = w.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}

// tunnel copies both ways until either side is done.
func tunnel(fromClient io.Reader, client, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, fromClient)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, up)
		if cw, ok := client.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// forwardHTTP passes HTTP/1 requests from the sandbox to the server one by one, setting the rule's headers on each
// (replacing any the sandbox sent), and the answers back. An upgrade (101) turns the connection into a tunnel.
func forwardHTTP(br *bufio.Reader, client, up net.Conn, headers map[string]string) {
	ubr := bufio.NewReader(up)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if err := req.Write(up); err != nil {
			return
		}
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			return
		}
		err = resp.Write(client)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			tunnel(br, client, &readerConn{Conn: up, r: ubr})
			return
		}
	}
}

// readerConn is a connection whose reads come through a buffered reader that may hold bytes already.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
