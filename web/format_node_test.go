package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// These tests run the demo page's formatting (format.js) under Node,
// skipped where Node is not installed. The client package's own modules are
// tested in clients/js/test (node --test, run by scripts/test-js).

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runNode runs testdata/harness.mjs next to a copy of format.js and returns
// its stdout.
func runNode(t *testing.T, mode, arg string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "format.js"), staticFile(t, "format.js"))
	harness, err := os.ReadFile("testdata/harness.mjs")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "harness.mjs"), string(harness))
	writeFile(t, filepath.Join(dir, "package.json"), `{"type":"module"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "harness.mjs", mode, arg)
	cmd.Dir = dir
	stdout, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", mode, err, stdout, stderr)
	}
	return string(stdout)
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestToolArgsAndTimesAreFormattedCompactly(t *testing.T) {
	// Raw JSON: the gateway's key order is kept (a Go map would sort it).
	arg := `{"args":[{"query":"How long does shipping take?","limit":3},` +
		`{"query":"` + strings.Repeat("x", 100) + `","token":"[redacted]"},{},null,{"filter":{"tags":["a","b"]}}],` +
		`"durations":[0,12.4,999,1432,12500,125000,-1,null],` +
		`"remaining":[42000,41001,0,-5,3725000,90000000]}`
	var got struct{ Args, Durations, Remaining []string }
	if err := json.Unmarshal([]byte(runNode(t, "format", arg)), &got); err != nil {
		t.Fatal(err)
	}
	want := struct{ Args, Durations, Remaining []string }{
		Args: []string{
			`query: "How long does shipping take?", limit: 3`,
			`query: "` + strings.Repeat("x", 39) + `…", token: [redacted]`,
			``,
			``,
			`filter: {"tags":["a","b"]}`,
		},
		Durations: []string{"0 ms", "12 ms", "999 ms", "1.4 s", "13 s", "2 min 5 s", "", ""},
		Remaining: []string{"0:42", "0:42", "0:00", "0:00", "1:02:05", "1 d 1 h"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("formatted\n got %q\nwant %q", got, want)
	}
}
