package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// newTable starts a table of tab-separated columns with its header line, aligned the same in every command
// that lists things; Flush writes it.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}
