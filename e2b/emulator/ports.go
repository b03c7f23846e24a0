package emulator

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// The sandbox's other ports, as E2B's edge serves them: every port of a sandbox at <port>-<sandboxID>.<domain>
// (or with the routing headers), answered by whatever listens on it inside the sandbox, WebSockets included. A
// sandbox created with network allowPublicTraffic false answers only requests that carry its traffic access token
// in trafficTokenHeader; the header is removed before the request reaches the sandbox.

// trafficTokenHeader carries a sandbox's traffic access token.
const trafficTokenHeader = "E2b-Traffic-Access-Token"

// errPortClosed is a dial to a port nothing in the sandbox listens on.
var errPortClosed = errors.New("nothing listens on the port")

// trafficToken is the traffic access token of a new sandbox with the create's network n: one when n turns public
// traffic off, else none.
func trafficToken(n *wire.Network) string {
	if n == nil || n.AllowPublicTraffic == nil || *n.AllowPublicTraffic {
		return ""
	}
	return randomID(32)
}

// servePort answers a request for port (not envd's) of sandbox id.
func (s *Server) servePort(w http.ResponseWriter, r *http.Request, id, port string) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		writeProxyError(w, id, "The sandbox is running but port is not open")
		return
	}
	sb := s.awake(id)
	if sb == nil {
		writeProxyError(w, id, "The sandbox was not found")
		return
	}
	s.mu.Lock()
	token, template, accessToken := sb.TrafficToken, sb.TemplateID, sb.AccessToken
	s.mu.Unlock()
	if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(trafficTokenHeader)), []byte(token)) != 1 {
		writeEdgeError(w, http.StatusForbidden, id, "Missing or invalid traffic access token")
		return
	}
	if n == codeInterpreterPort && template == codeInterpreterTemplate && s.codeInterpreterOffered() &&
		s.opts.Envd == nil {
		if err := s.ensureCodeInterpreter(r.Context(), id, accessToken); err != nil {
			writeProxyError(w, id, "The sandbox is running but port is not open: "+err.Error())
			return
		}
	}
	if s.opts.Envd != nil {
		// E2B's own envd runs as a host process, not in a network of the sandbox's: only its port is served.
		writeProxyError(w, id, "The sandbox is running but port is not open")
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", net.JoinHostPort("127.0.0.1", port)
			pr.Out.Host = r.Host // the app sees the host the browser asked for, as behind E2B's edge
			for _, h := range []string{trafficTokenHeader, "E2b-Sandbox-Id", "E2b-Sandbox-Port"} {
				pr.Out.Header.Del(h)
			}
		},
		Transport: &http.Transport{
			// Each connection is made in the sandbox's network by a process of its own (dialPort): none is kept.
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return s.envd.dialPort(ctx, id, n)
			},
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, errPortClosed) {
				writeProxyError(w, id, "The sandbox is running but port is not open")
				return
			}
			writeProxyError(w, id, "The sandbox is running but the connection to its port failed")
		},
	}
	proxy.ServeHTTP(w, r)
}

// dialPort connects to 127.0.0.1:port in the sandbox's own network (loopback only, unreachable from the host).
func (e *envdService) dialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	st := e.state(id)
	if st == nil {
		return nil, errPortClosed
	}
	st.mu.Lock()
	in := st.init
	usable := in != nil && !st.stopped && !st.frozen
	st.mu.Unlock()
	if !usable {
		// No process ever ran in the sandbox (its init starts with the first), so nothing listens.
		return nil, errPortClosed
	}
	select {
	case <-in.exited:
		return nil, errPortClosed
	default:
	}
	return in.iso.dialInside(ctx, in.pid, port)
}

// writeEdgeError writes the edge proxy's JSON answer with status.
func writeEdgeError(w http.ResponseWriter, status int, id, message string) {
	body, _ := json.Marshal(struct {
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Code      int    `json:"code"`
	}{id, message, status})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
