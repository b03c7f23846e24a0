package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// newTable starts a table of tab-separated columns with its header line, aligned the same in every command
// that lists things; Flush writes it.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// cell makes a value safe to print in a table or a line of text (display.Escape). Values that came from a caller
// (sandbox IDs, sessions, arguments, errors) always go through it.
func cell(s string) string { return display.Escape(s) }
