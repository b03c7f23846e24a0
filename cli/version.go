package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version, when set at link time (go build -ldflags "-X github.com/e2b-mcp/e2b-mcp/cli.version=v1.2.3"),
// overrides the version Go records in the binary. It is a variable only because -X can set nothing else.
var version string

// Version is e2b-mcp's version: the link-time override, else the module version `go install` records, else
// the VCS revision of a development build.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return versionFrom(info)
}

func versionFrom(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "devel-" + rev
}

func runVersion(_ context.Context, a *app, args []string) error {
	f := newFlags("version", "", "Print e2b-mcp's version.")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "e2b-mcp %s (%s, %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
