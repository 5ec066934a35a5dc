package gateway

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at build time with -ldflags "-X github.com/turnstile-gw/turnstile/gateway.version=…
// -X github.com/turnstile-gw/turnstile/gateway.commit=…" (make build, make docker).
var (
	version = "dev"
	commit  = "unknown"
)

// buildVersion is the version and commit of this binary: those set at
// build time with -ldflags (make
// build, make docker: `git describe --tags --always --dirty` and the short
// commit), else what the Go toolchain recorded: the module version of a
// `go install …@vX.Y.Z`, and the VCS revision of a build in a git
// checkout (with "-dirty" for uncommitted changes). "dev" and "unknown"
// when neither says.
func buildVersion() (v, c string) {
	info, _ := debug.ReadBuildInfo()
	return resolveVersion(version, commit, info)
}

// resolveVersion is buildVersion given the ldflags values and the build
// info (nil when the binary has none).
func resolveVersion(v, c string, info *debug.BuildInfo) (string, string) {
	if info == nil {
		return v, c
	}
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	if c != "unknown" {
		return v, c
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if rev == "" {
		return v, c
	}
	if dirty {
		rev += "-dirty"
	}
	return v, rev
}

// versionCommand prints the build's version, commit and Go version:
// `gateway version`.
func versionCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: gateway version")
		return 2
	}
	v, c := buildVersion()
	fmt.Fprintf(stdout, "turnstile gateway %s\ncommit: %s\ngo: %s %s/%s\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
