package tools

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// Previews makes the private links of sandbox ports: links to this server's preview proxy, signed for one owner,
// sandbox and port, that work until they expire. The proxy adds the sandbox's traffic token, which nothing else
// sees.
type Previews interface {
	Link(owner, sandboxID string, port int, ttl time.Duration) (link string, expires time.Time, err error)
}

type getURLArgs struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox the web server runs in."`
	Port             int    `json:"port" jsonschema:"minimum=1,maximum=65535" jsonschema_description:"The port the server listens on inside the sandbox (e.g. 8000 for python3 -m http.server, 5173 for Vite, 3000 for Next.js)."`
	ExpiresInSeconds int    `json:"expires_in_seconds,omitempty" jsonschema:"minimum=1,maximum=86400" jsonschema_description:"How long a private link works (ignored for public links, which work while the sandbox runs)."`
}

type getURLResult struct {
	SandboxID string `json:"sandbox_id"`
	Port      int    `json:"port"`
	URL       string `json:"url" jsonschema_description:"The link the user opens in their browser."`
	Access    string `json:"access" jsonschema_description:"Who can open the link: public (anyone who has it, while the sandbox runs) or private (anyone who has it, through this server, until it expires)."`
	ExpiresAt string `json:"expires_at,omitempty" jsonschema_description:"When a private link stops working (RFC 3339, UTC)."`
	Listening bool   `json:"listening" jsonschema_description:"Whether something listens on the port in the sandbox now."`
	// ListeningPorts are the TCP ports that do listen, when the asked one does not.
	ListeningPorts []int  `json:"listening_ports,omitempty" jsonschema_description:"The TCP ports something listens on now, when port is not one of them."`
	Note           string `json:"note"`
}

const getURLName = "e2b_get_url"

// getURL is e2b_get_url: the link at which the user sees what a sandbox serves on a port.
type getURL struct{ *base }

func (t getURL) tool() Tool {
	return define(t.base, definition[getURLArgs, getURLResult]{
		name: getURLName,
		description: fmt.Sprintf("Get the link at which the user opens, in their browser, the web server a sandbox runs on "+
			"a port (a dev server, python3 -m http.server): start it first in the background (e2b_exec with "+
			"background true), listening on 0.0.0.0 or 127.0.0.1. The result says whether anything listens on the "+
			"port yet, and who can open the link: give it to the user, it is a credential for that port. Private "+
			"links work for expires_in_seconds (default %d, max %d).", defaultLinkSeconds, maxLinkSeconds),
		// A preview link shows what a port serves; each call signs a new link.
		hints:    hints{readOnly: true, destructive: false, idempotent: false, openWorld: true},
		defaults: getURLArgs{ExpiresInSeconds: defaultLinkSeconds},
		run:      t.run,
	})
}

func (t getURL) run(ctx context.Context, call Caller, a *getURLArgs) (*getURLResult, error) {
	if a.Port == e2b.EnvdPort {
		return nil, userErrorf("Port %d is E2B's own daemon in the sandbox, not a web server of yours; no link is made.",
			a.Port)
	}
	seconds := a.ExpiresInSeconds
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	e := envd(c, rec)
	listening, err := listeningPorts(ctx, e)
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	res := getURLResult{SandboxID: rec.ID, Port: a.Port, Listening: slices.Contains(listening, a.Port)}
	if !res.Listening {
		res.ListeningPorts = listening
	}
	if t.previews == nil {
		res.URL, res.Access = e.PortURL(a.Port)+"/", "public"
		res.Note = "Anyone who has this link can open the port while the sandbox runs."
	} else {
		link, expires, err := t.previews.Link(call.Owner, rec.ID, a.Port, time.Duration(seconds)*time.Second)
		if err != nil {
			return nil, err
		}
		res.URL, res.Access, res.ExpiresAt = link, "private", expires.UTC().Format(time.RFC3339)
		res.Note = "The link goes through this server, which alone can reach the sandbox's ports; it works until " +
			res.ExpiresAt + " for whoever has it, for this port only."
	}
	if !res.Listening {
		res.Note += fmt.Sprintf(" Nothing listens on port %d yet: start the server (in the background) before the "+
			"user opens the link.", a.Port)
	}
	return &res, nil
}

// listeningPorts are the TCP ports something listens on in the sandbox, in order, read from the kernel's socket
// tables (which every Linux has, unlike ss or netstat).
func listeningPorts(ctx context.Context, e *e2b.Envd) ([]int, error) {
	var out strings.Builder
	_, err := e.RunCommand(ctx, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", e2b.CommandOptions{
		Timeout: 10 * time.Second,
		OnOutput: func(kind e2b.EventKind, data []byte) {
			if kind == e2b.EventStdout && out.Len() < 1<<20 {
				out.Write(data)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return parseListening(out.String()), nil
}

// parseListening reads the listening ports of /proc/net/tcp{,6}: lines "sl local_address rem_address st ...",
// local_address HEXIP:HEXPORT and st 0A for LISTEN.
func parseListening(table string) []int {
	var ports []int
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if ok && err == nil && !slices.Contains(ports, int(p)) && p != e2b.EnvdPort {
			ports = append(ports, int(p))
		}
	}
	slices.Sort(ports)
	return ports
}
