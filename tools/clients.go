package tools

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Client is what e2b-mcp knows of one MCP client: which copy of a tool result it hands its model, how much of
// it, whether images get through, what it answers to an approval question and how long it waits for a call.
// The result budget e2b-mcp keeps each copy within follows from it (Budget).
type Client struct {
	// Profile names it for --client-profile.
	Profile string
	// names are the clientInfo.name values (lower case) it introduces itself by, as the measured versions send
	// them (initialize, or each request's _meta in protocol 2026-07-28).
	names []string
	// Reads is the copy of a result its model gets: ReadsText (the content) or ReadsStructured
	// (structuredContent when there is one, the content dropped).
	Reads string
	// InlineChars is how many characters of a result it hands its model whole; beyond that it cuts the result,
	// keeps it in a file, or refuses it.
	InlineChars int
	// Images says whether a tool's image content reaches the model.
	Images bool
	// Elicitation is what it answers to a server's question (an approval).
	Elicitation string
	// ToolTimeout is how long it waits for one tool call (0: no fixed limit known).
	ToolTimeout time.Duration
	// Budget is the characters e2b-mcp keeps each copy of a result within for it: below InlineChars by what the
	// client adds around a result (its wrapper, a second escaping of the JSON), so that the whole result,
	// the facts before the output and the output's tail, reaches the model.
	Budget int
}

// The copies of a result a client may hand its model.
const (
	ReadsText       = "text"
	ReadsStructured = "structured"
)

// Clients is what e2b-mcp knows of the clients people use, each figure with where it comes from. "Measured" is
// the client at the version named, from npm, headless against a stand-in for its model API (scripts/clients).
var Clients = []Client{
	{
		Profile: "claude-code", names: []string{"claude-code"},
		// Measured, Claude Code 2.1.332: the model gets the text content; structuredContent is neither shown nor
		// counted. Inline up to about 50,000 characters (its default cap for MCP results; a tool may raise it
		// with _meta "anthropic/maxResultSizeChars", up to 500,000), and a result over 25,000 tokens is refused.
		Reads: ReadsText, InlineChars: 50_000, Images: true, Budget: 45_000,
		// Measured: -p answers every question with cancel at once; the interactive terminal shows a dialog.
		Elicitation: "cancel in -p mode, a dialog when interactive",
		// MCP_TOOL_TIMEOUT sets it; long calls move to the background after 120 s (or run as MCP Tasks).
		ToolTimeout: 0,
	},
	{
		Profile: "claude-desktop", names: []string{"claude-ai", "claude-desktop", "claude.ai", "claude"},
		// Published (Anthropic's connectors FAQ): about 150,000 characters a result, 300 s a call; no
		// elicitation (Cowork answers cancel).
		Reads: ReadsText, InlineChars: 150_000, Images: true, Budget: 120_000,
		Elicitation: "none offered (Cowork: cancel)", ToolTimeout: 300 * time.Second,
	},
	{
		Profile: "codex", names: []string{"codex-mcp-client"},
		// Measured, Codex CLI 0.169.0: when a result has structuredContent the model gets only that (images,
		// resource links and text dropped); a result without it reaches the model with its images, so e2b-mcp
		// sends an image result without it (Tool.Images). It cuts a result at about 48,000 characters. codex
		// exec answers every question with decline at once, showing nothing. tool_timeout_sec defaults to 300.
		Reads: ReadsStructured, InlineChars: 48_000, Images: true, Budget: 40_000,
		Elicitation: "decline at once in codex exec", ToolTimeout: 300 * time.Second,
	},
	{
		Profile: "copilot-cli", names: []string{"github-copilot-cli", "copilot-cli", "copilot"},
		// Measured, GitHub Copilot CLI 1.0.102 headless, with its model at the stand-in through BYOK
		// (COPILOT_PROVIDER_BASE_URL; Chat Completions as gpt-4.1, Anthropic Messages as claude-sonnet-4.5):
		// a result over about 20 KB (21,154 characters; a 29.1 KB one measured) goes to a local file and the
		// model gets a short preview, an 18,000-character one arrives whole; the model gets a result's JSON
		// text (text and structuredContent are the same JSON, so which copy it reads is not told apart: it is
		// taken to read structuredContent, as first reported); an image result reaches the model without its
		// image with either model, so the note gives a download link; decline at once; 180 s a call.
		Reads: ReadsStructured, InlineChars: 21_154, Images: false, Budget: 18_000,
		Elicitation: "decline at once", ToolTimeout: 180 * time.Second,
	},
	{
		Profile: "gemini-cli", names: []string{"gemini-cli-mcp-client"},
		// Measured, Gemini CLI 0.61.0: the content; over 40,000 characters it keeps the first 8,000 and the last
		// 32,000, counted on the result's JSON as it wraps it (the text escaped a second time); images arrive; no
		// elicitation offered; 10 minutes a call.
		Reads: ReadsText, InlineChars: 40_000, Images: true, Budget: 30_000,
		Elicitation: "none offered", ToolTimeout: 10 * time.Minute,
	},
	{
		Profile: "cursor", names: []string{"cursor", "cursor-vscode"},
		// Not measured here: Cursor reads the content and shows images; its inline limit is not published, so
		// it gets the default budget.
		Reads: ReadsText, InlineChars: unknownClient.InlineChars, Images: true, Elicitation: "a dialog",
		Budget: DefaultResultLimit,
	},
	{
		Profile: "vscode", names: []string{"visual studio code", "visual-studio-code", "vscode"},
		// Not measured here: VS Code's chat reads the content, shows images and asks elicitation questions in a
		// dialog; its inline limit is not published, so it gets the default budget.
		Reads: ReadsText, InlineChars: unknownClient.InlineChars, Images: true, Elicitation: "a dialog",
		Budget: DefaultResultLimit,
	},
}

// unknownClient is any other client: a budget every client measured shows whole (Copilot CLI's is the smallest).
var unknownClient = Client{Profile: "default", Reads: ReadsText, InlineChars: 21_154, Images: true,
	Elicitation: "unknown",
	Budget:      DefaultResultLimit}

// ClientFor finds the client that introduced itself as name (clientInfo.name), or the default.
func ClientFor(name string) Client {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, c := range Clients {
		if slices.Contains(c.names, name) {
			return c
		}
	}
	return unknownClient
}

// ClientNamed is the client of a --client-profile name ("default" included).
func ClientNamed(profile string) (Client, bool) {
	if profile == unknownClient.Profile {
		return unknownClient, true
	}
	for _, c := range Clients {
		if c.Profile == profile {
			return c, true
		}
	}
	return Client{}, false
}

// ClientProfiles are the names --client-profile takes.
func ClientProfiles() []string {
	names := []string{unknownClient.Profile}
	for _, c := range Clients {
		names = append(names, c.Profile)
	}
	return names
}

type clientKey struct{}

// WithClient returns ctx for a call made by client c.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// clientOf is the client making the call of ctx (the default when the server did not say).
func clientOf(ctx context.Context) Client {
	if c, ok := ctx.Value(clientKey{}).(Client); ok {
		return c
	}
	return unknownClient
}
