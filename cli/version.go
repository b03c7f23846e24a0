package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit, when set at link time (go build -ldflags "-X github.com/e2b-mcp/e2b-mcp/cli.version=1.2.3
// -X github.com/e2b-mcp/e2b-mcp/cli.commit=abc123", as the release build in .goreleaser.yaml does), override what
// Go records in the binary. They are variables only because -X can set nothing else.
var version, commit string

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

// Commit is the commit e2b-mcp was built from: the link-time one, else the VCS revision Go recorded (a build in a
// checkout without -buildvcs=false), else "" (go install of a module version records none).
func Commit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		return setting(info, "vcs.revision")
	}
	return ""
}

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

func versionFrom(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev := setting(info, "vcs.revision")
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if setting(info, "vcs.modified") == "true" {
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
	built := ""
	if c := Commit(); c != "" {
		built = "commit " + c + ", "
	}
	fmt.Fprintf(a.stdout, "e2b-mcp %s (%s%s, %s/%s)\n", Version(), built, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
