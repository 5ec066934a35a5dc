package gateway_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionCommandPrintsVersionCommitAndGo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := realMain([]string{"version"}, configEnv(nil), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	v, c := buildVersion()
	want := "turnstile gateway " + v + "\ncommit: " + c + "\ngo: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if out.String() != want {
		t.Errorf("version printed\n%s\nwant\n%s", out.String(), want)
	}
	if code := realMain([]string{"version", "extra"}, configEnv(nil), &out, &errOut); code != 2 {
		t.Errorf("version with an argument: exit %d, want 2", code)
	}
}

func TestVersionFallsBackToWhatTheToolchainRecorded(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name         string
		v, c         string
		info         *debug.BuildInfo
		wantV, wantC string
	}{
		{"ldflags win", "v1.2.0", "abc1234", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, Settings: vcs("f00f00f00f", "true")},
			"v1.2.0", "abc1234"},
		{"go install @version", "dev", "unknown", &debug.BuildInfo{Main: debug.Module{Version: "v1.3.0"}}, "v1.3.0", "unknown"},
		{"go build in a checkout", "dev", "unknown", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("0123456789abcdef", "false")}, "dev", "0123456"},
		{"uncommitted changes", "dev", "unknown", &debug.BuildInfo{Settings: vcs("0123456789abcdef", "true")}, "dev", "0123456-dirty"},
		{"nothing recorded", "dev", "unknown", nil, "dev", "unknown"},
	} {
		if v, c := resolveVersion(tc.v, tc.c, tc.info); v != tc.wantV || c != tc.wantC {
			t.Errorf("%s: %s %s, want %s %s", tc.name, v, c, tc.wantV, tc.wantC)
		}
	}
}

// The Makefile and the Dockerfile stamp the version with -ldflags -X;
// the names they set must be this package's variables.
const versionPkg = "github.com/turnstile-gw/turnstile/gateway"

func TestLdflagsSetTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-ldflags", "-X "+versionPkg+".version=v0.7.1 -X "+versionPkg+".commit=1a2b3c4", "-o", bin, "../cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "turnstile gateway v0.7.1\ncommit: 1a2b3c4\n") {
		t.Errorf("gateway version printed %q", out)
	}
}
