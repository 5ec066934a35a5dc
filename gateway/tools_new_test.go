package gateway_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyModule copies the module's go.mod and go.sum and the top-level
// folders holding the packages that ./tools/builtin and its tests need
// into a temporary directory, and returns it.
func copyModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-deps", "-test", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./tools/builtin")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	tops := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == "." {
			continue
		}
		tops[strings.Split(filepath.ToSlash(rel), "/")[0]] = true
	}
	tmp := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(tmp, rel), 0o755)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(tmp, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

func TestScaffoldedGoToolBuildsRegistersAndPassesItsTest(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a copy of the module")
	}
	tmp := copyModule(t)
	dir := filepath.Join(tmp, "tools", "builtin")
	var stdout, stderr bytes.Buffer
	if code := toolsCommand([]string{"new", "-dir", dir, "weather_report"}, configEnv(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	for _, f := range []string{"weather_report/schema.json", "weather_report/guide.md", "weather_report.go", "weather_report_test.go", "registry.go"} {
		if !strings.Contains(stdout.String(), "wrote "+filepath.Join(dir, f)) {
			t.Errorf("stdout does not list %s:\n%s", f, stdout.String())
		}
	}
	reg, err := os.ReadFile(filepath.Join(dir, "registry.go"))
	if err != nil || !strings.Contains(string(reg), `"weather_report":      newWeatherReport,`) {
		t.Fatalf("registry.go does not register the tool (gofmt-aligned):\n%s", reg)
	}

	// The copy builds, the new tool's own test passes, and so do the
	// package's tests that check every folder is a registered tool.
	cmd := exec.Command("go", "test", "-count=1", "-v", "./tools/builtin/")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the scaffolded copy: %v\n%s", err, out)
	}
	for _, test := range []string{"TestWeatherReportAnswersThroughTheRegistry", "TestBuiltinManifestsAreValid"} {
		if !strings.Contains(string(out), "--- PASS: "+test) {
			t.Errorf("%s did not run and pass:\n%s", test, out)
		}
	}

	// The golden renderings of ./tools list every built-in, so they fail
	// until regenerated; the command printed for that fixes them, and the
	// printed steps go on to test the whole tools tree.
	goldens := func(args ...string) (string, error) {
		cmd := exec.Command("go", append([]string{"test", "-count=1", "-v", "-run", "RenderingsMatchGolden"}, args...)...)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	toolsPkg := filepath.Join(tmp, "tools")
	if out, err := goldens(toolsPkg); err == nil || !strings.Contains(out, "--- FAIL: TestGeminiRenderingsMatchGolden") ||
		!strings.Contains(out, "--- FAIL: TestOpenAIRenderingsMatchGolden") {
		t.Errorf("the golden renderings pass without the new tool (err %v): the update step is not needed?\n%s", err, out)
	}
	var update []string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if cmd, _, _ := strings.Cut(line, "#"); strings.Contains(cmd, " -update") {
			update = strings.Fields(cmd)
		}
	}
	if want := []string{"go", "test", toolsPkg, "-run", "Golden", "-update"}; strings.Join(update, " ") != strings.Join(want, " ") {
		t.Fatalf("next steps do not say to run %q:\n%s", strings.Join(want, " "), stdout.String())
	}
	if !strings.Contains(stdout.String(), "go test "+toolsPkg+"/... && go run ./cmd/gateway tools check") {
		t.Errorf("next steps do not say to test %s/... and check the tools:\n%s", toolsPkg, stdout.String())
	}
	cmd = exec.Command(update[0], update[1:]...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(update, " "), err, out)
	}
	if out, err := goldens(toolsPkg); err != nil || !strings.Contains(out, "--- PASS: TestGeminiRenderingsMatchGolden") ||
		!strings.Contains(out, "--- PASS: TestOpenAIRenderingsMatchGolden") {
		t.Errorf("the golden renderings after the update: %v\n%s", err, out)
	}
	for _, f := range []string{"gemini_parameters_json_schema", "gemini_schema", "openai_functions"} {
		if b, err := os.ReadFile(filepath.Join(toolsPkg, "testdata", f+".golden.json")); err != nil || !strings.Contains(string(b), `"weather_report"`) {
			t.Errorf("%s.golden.json does not list weather_report after the update (%v)", f, err)
		}
	}

	// A second run refuses to overwrite anything.
	stdout.Reset()
	stderr.Reset()
	if code := toolsCommand([]string{"new", "-dir", dir, "weather_report"}, configEnv(nil), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "already exists") {
		t.Errorf("second run: exit %d, stderr %s", code, stderr.String())
	}
}

func TestScaffolderRefusesAFolderWithoutTheConstructorsTable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := toolsCommand([]string{"new", "-dir", dir, "weather"}, configEnv(nil), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "must be the built-in tools package") {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files were written: %v", entries)
	}
}
