// Package lifecycle keeps the store's view of sandboxes true to E2B's and cleans up after sessions that are gone:
// it adopts tagged sandboxes the store lacks (a crash between create and record), marks vanished ones gone with a
// reason, and applies the orphan action to sandboxes whose session lease has lapsed. It never touches a sandbox
// that does not carry this server's tags, and nothing here runs at shutdown: stopping the server kills nothing.
package lifecycle

// The metadata tags every sandbox created by e2b-mcp carries, so that E2B's dashboard shows who made it and the
// server can find its own sandboxes again after a restart or a crash.
const (
	TagManaged = "e2b-mcp"
	TagTitle   = "e2b-mcp.title"
	TagSession = "e2b-mcp.session_id"
	TagOwner   = "e2b-mcp.owner"
)

// Metadata is the tag set for a new sandbox of owner in session.
func Metadata(owner, session, title string) map[string]string {
	return map[string]string{
		TagManaged: "true",
		TagOwner:   owner,
		TagSession: session,
		TagTitle:   title,
	}
}

// sessionFilter selects one session's sandboxes at E2B.
func sessionFilter(owner, session string) map[string]string {
	return map[string]string{TagManaged: "true", TagOwner: owner, TagSession: session}
}
