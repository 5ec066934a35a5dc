package gateway_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// End-to-end tests of `gateway script run`: the examples of
// examples/scripts pass against the example tools, and a wrong expectation
// fails with a diff naming the step.

// exampleTicketAPI answers as examples/ticketapi does (T-1001, T-1002, …,
// status open) for the example create_ticket tool.
func exampleTicketAPI(t *testing.T) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/tickets" || r.Header.Get("Authorization") != "Bearer dev-key" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var in struct{ Title string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		n++
		id := fmt.Sprintf("T-%d", 1000+n)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "title": in.Title, "status": "open"})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runScriptCommand runs `gateway script run args…` with the example tools
// (their API at a test server) in the environment.
func runScriptCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	env := configEnv(map[string]string{
		"TURNSTILE_TOOLS_DIR": exampleToolDir(t, exampleTicketAPI(t).URL),
		"TICKETS_API_KEY":     "dev-key",
	})
	var out, errOut bytes.Buffer
	code = realMain(append([]string{"script", "run"}, args...), env, &out, &errOut)
	return code, out.String(), errOut.String()
}

func readJUnit(t *testing.T, path string) junitReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r junitReport
	if err := xml.Unmarshal(b, &r); err != nil {
		t.Fatalf("the JUnit file is not XML: %v\n%s", err, b)
	}
	return r
}

// junitReport is what a CI system reads of the JUnit file.
type junitReport struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Text string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestScriptRunPassesTheExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "scripts", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("examples/scripts: %v, %v", files, err)
	}
	junit := filepath.Join(t.TempDir(), "scripts.xml")
	code, out, errOut := runScriptCommand(t, append([]string{"-junit", junit}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := strings.Count(out, "PASS "); n != len(files) || strings.Contains(out, "FAIL") {
		t.Fatalf("%d PASS lines for %d scripts:\n%s", n, len(files), out)
	}
	r := readJUnit(t, junit)
	if len(r.Suites) != len(files) || r.Failures != 0 || r.Tests < len(files) {
		t.Fatalf("JUnit: %d suites, %d tests, %d failures; want %d suites, no failure", len(r.Suites), r.Tests, r.Failures, len(files))
	}
}

// A wrong expectation: the sixth search of a text turn is expected to run,
// but the budget refuses it.
const wrongBudgetScript = `name: wrong budget
turns:
  - user: "search six times"
    rounds:
      - calls:
          - {tool: kb_search, args: {query: shipping}, expect: {ran: true}}
          - {tool: kb_search, args: {query: refunds}, expect: {ran: true}}
          - {tool: kb_search, args: {query: payment}, expect: {ran: true}}
          - {tool: kb_search, args: {query: gift cards}, expect: {ran: true}}
          - {tool: kb_search, args: {query: subscriptions}, expect: {ran: true}}
      - calls:
          - {tool: kb_search, args: {query: wholesale}, expect: {ran: true}}
      - text: "done"
    expect: {text: "done"}
`

func TestScriptRunFailsAWrongExpectationNamingTheStep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wrong.yaml")
	if err := os.WriteFile(path, []byte(wrongBudgetScript), 0o600); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "wrong.xml")
	code, out, errOut := runScriptCommand(t, "-junit", junit, path)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a mismatch)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"FAIL wrong budget", `turn 1 ("search six times")`, "round 2, call 1 (kb_search):",
		"- expected: ran, ok", "+ got:      refused BUDGET_EXCEEDED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	r := readJUnit(t, junit)
	if r.Failures != 1 || len(r.Suites) != 1 || len(r.Suites[0].Cases) != 1 || r.Suites[0].Cases[0].Failure == nil ||
		!strings.Contains(r.Suites[0].Cases[0].Failure.Text, "refused BUDGET_EXCEEDED") {
		t.Fatalf("JUnit: %+v", r)
	}
}

func TestScriptRunRefusesAScriptWithAnUnknownFieldNamingItsLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.yaml")
	typo := "turns:\n  - user: hi\n    rounds:\n      - text: hello\n        expct: {}\n"
	if err := os.WriteFile(path, []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runScriptCommand(t, path)
	if code != 2 || !strings.Contains(errOut, "line 5: field expct not found") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 2 naming line 5 and nothing run", code, out, errOut)
	}
}
