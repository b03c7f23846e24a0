package cli

import (
	"errors"
	"path/filepath"
	"runtime"
)

// defaultStateDir is where e2b-mcp keeps its state when --state-dir is not given: $XDG_STATE_HOME/e2b-mcp where
// that is set, else the per-OS place for application state: ~/.local/state/e2b-mcp on Linux and other Unix
// systems, ~/Library/Application Support/e2b-mcp on macOS, %LocalAppData%\e2b-mcp on Windows.
func (a *app) defaultStateDir() (string, error) {
	if x := a.getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "e2b-mcp"), nil
	}
	switch runtime.GOOS {
	case "windows":
		if d := a.getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "e2b-mcp"), nil
		}
		return "", errors.New("%LocalAppData% is not set; pass --state-dir")
	case "darwin", "ios":
		if h := a.getenv("HOME"); h != "" {
			return filepath.Join(h, "Library", "Application Support", "e2b-mcp"), nil
		}
	default:
		if h := a.getenv("HOME"); h != "" {
			return filepath.Join(h, ".local", "state", "e2b-mcp"), nil
		}
	}
	return "", errors.New("$HOME is not set; pass --state-dir")
}

// stateDir is the --state-dir flag's value, or the default.
func (a *app) stateDir(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	return a.defaultStateDir()
}
