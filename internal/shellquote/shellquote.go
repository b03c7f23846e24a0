// Package shellquote quotes words for a POSIX shell command line shown to a person or a model to run.
package shellquote

import "strings"

// Quote returns s as one shell word: as it is when it holds only characters no shell treats specially,
// otherwise in single quotes.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-~") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
