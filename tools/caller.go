package tools

import "context"

// Caller is who makes a tool call: the owner (principal) whose E2B key and records are used, and the session that
// groups the owner's sandboxes. The server puts it in the request context before any tool runs.
type Caller struct{ Owner, Session string }

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller in ctx; ok is false when there is none or it names no owner or session.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok && c.Owner != "" && c.Session != ""
}

type judgedKey struct{}

// WithJudged returns ctx carrying the arguments the policy judged the call by (Tool.Judged), for a tool that
// must act on exactly what was judged: a sync's local_path, which the file system could resolve differently by
// the time the tool runs.
func WithJudged(ctx context.Context, args map[string]any) context.Context {
	return context.WithValue(ctx, judgedKey{}, args)
}

// judgedArgs returns the arguments of WithJudged; nil for a call the policy did not judge (a test's).
func judgedArgs(ctx context.Context) map[string]any {
	args, _ := ctx.Value(judgedKey{}).(map[string]any)
	return args
}
