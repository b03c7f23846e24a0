package tools

import (
	"context"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Notifier writes a notification of the call in ctx on the stream that carries the call's response, and returns
// once it is written there (or dropped): the transports of mcp-go queue notifications for a goroutine of their
// own, which may write them after the response, or (over streamable HTTP with a protocol session) on another
// stream of the session. A client drops a progress notification that comes after its call's response.
type Notifier func(ctx context.Context, n mcp.JSONRPCNotification) error

type notifierKey struct{}

// WithNotifier gives the calls of ctx the transport's Notifier.
func WithNotifier(ctx context.Context, n Notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// notify sends a notification of the call in ctx to its client, through the transport's Notifier where the
// server set one, else through mcp-go's session.
func notify(ctx context.Context, method string, params map[string]any) error {
	n := mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	}
	if send, ok := ctx.Value(notifierKey{}).(Notifier); ok && send != nil {
		return send(ctx, n)
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return nil
	}
	return srv.SendNotificationToClient(ctx, method, params)
}

// MuteLater returns a context whose calls notify as ctx's do until mute is called, and send nothing after: for a
// call that goes on after its answer, whose client must get no notification of it then.
func MuteLater(ctx context.Context) (_ context.Context, mute func()) {
	var muted atomic.Bool
	send, _ := ctx.Value(notifierKey{}).(Notifier)
	return WithNotifier(ctx, func(c context.Context, n mcp.JSONRPCNotification) error {
		switch {
		case muted.Load():
			return nil
		case send != nil:
			return send(c, n)
		}
		return notify(WithNotifier(c, nil), n.Method, n.Params.AdditionalFields)
	}), func() { muted.Store(true) }
}
