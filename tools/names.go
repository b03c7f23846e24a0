package tools

import (
	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// Bounds of what a caller names and sends: a title or a checkpoint name is stored, put in E2B's metadata and
// shown in every listing; an ID is looked up and, when unknown, repeated in the error.
const (
	// maxNameBytes bounds a sandbox title and a checkpoint name.
	maxNameBytes = 256
	// maxIDBytes bounds a sandbox or checkpoint ID (E2B's sandbox IDs are about 20 bytes, checkpoint IDs 32); a
	// longer one is unknown without a lookup.
	maxIDBytes = 128
	// maxEchoBytes bounds what an error repeats of a value the caller sent.
	maxEchoBytes = 64
)

// checkName refuses a title or checkpoint name (param names it) that is too long or holds characters a
// terminal or a listing would not simply show.
func checkName(param, v string) error {
	if len(v) > maxNameBytes {
		return userErrorf("Invalid %s: it is %d bytes long; at most %d. Nothing was done.", param, len(v), maxNameBytes)
	}
	for _, r := range v {
		if display.Unsafe(r) {
			return userErrorf("Invalid %s '%s': it contains a control or formatting character. Nothing was done.",
				param, display.Prefix(v, maxEchoBytes))
		}
	}
	return nil
}

// echo is what an error repeats of an ID or name the caller sent: a short, escaped prefix.
func echo(v string) string { return display.Prefix(v, maxEchoBytes) }
