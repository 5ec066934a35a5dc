package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/orchestrator"
)

// End-to-end tests of manifest-only HTTP tools: a folder in
// TURNSTILE_TOOLS_DIR with schema.json (an "http" block) and guide.md, no Go
// code, called by the model through the browser protocol.

const createTicketSchema = `{
  "name": "create_ticket",
  "category": "action",
  "modes": ["text"],
  "requiresConfirmation": true,
  "timeoutMs": 3000,
  "redact": {"args": ["title"], "result": ["id"]},
  "http": {"url": "%s/tickets", "headers": {"Authorization": "Bearer ${TICKETS_API_KEY}"}},
  "parameters": {
    "type": "object",
    "properties": {"title": {"type": "string", "minLength": 3}, "details": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": false
  }
}`

const lookupTicketSchema = `{
  "name": "lookup_ticket",
  "category": "retrieval",
  "modes": ["text"],
  "redact": {"args": ["id"], "result": []},
  "http": {"url": "%s/tickets/lookup", "method": "GET", "headers": {"X-Api-Key": "${TICKETS_API_KEY}"}},
  "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
}`

// ticketService is the backend the HTTP tools call.
type ticketService struct {
	*httptest.Server
	mu      sync.Mutex
	created []string // titles, one per ticket created
	auth    []string // Authorization or X-Api-Key of every request
}

func newTicketService(t *testing.T) *ticketService {
	s := &ticketService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.auth = append(s.auth, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/tickets":
			var in struct{ Title string }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &in)
			s.created = append(s.created, in.Title)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id": "T-%d", "secretInternalNote": "x"}`, len(s.created))
		case r.Method == http.MethodGet && r.URL.Path == "/tickets/lookup":
			// ids name the status to answer with: "s404" → 404.
			var code int
			if _, err := fmt.Sscanf(r.URL.Query().Get("id"), "s%d", &code); err != nil {
				code = http.StatusOK
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"message": "answer %d", "status": "open"}`, code)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// toolsDir writes one folder per tool with the schema and a guide.
func toolsDir(t *testing.T, schemas map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, schema := range schemas {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		guide := "# " + name + "\n\nWorks with support tickets.\n"
		for file, content := range map[string]string{"schema.json": schema, "guide.md": guide} {
			if err := os.WriteFile(filepath.Join(dir, name, file), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// configWith loads the configuration from env as the binary would, with
// the test harness's adjustments.
func configWith(t *testing.T, env map[string]string) gateway.Config {
	t.Helper()
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	cfg, err := gateway.LoadConfig(nil, configEnv(env))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.ShutdownTimeout = 2 * time.Second
	return cfg
}

func ticketCall(title string) fakegemini.Call {
	return fakegemini.Call{Name: "create_ticket", Args: map[string]any{"title": title, "details": "grinder makes noise"}}
}

func TestHTTPToolCreatesTheTicketOnceAfterTheUserApproves(t *testing.T) {
	svc := newTicketService(t)
	dir := toolsDir(t, map[string]string{"create_ticket": fmt.Sprintf(createTicketSchema, svc.URL)})
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": dir, "TICKETS_API_KEY": "tk-123"})
	brain := fakegemini.NewScript(
		callStep(ticketCall("Noisy grinder")), textStep("I need your approval first."),
		callStep(ticketCall("Noisy grinder")), textStep("Ticket T-1 is open."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("open a ticket for my noisy grinder")
	res := ofType(evs, "tool.result")
	if len(res) != 1 || !refusedWith(res[0], "CONFIRMATION_REQUIRED") {
		t.Fatalf("first create_ticket: %v", res)
	}
	reqs := ofType(evs, "confirm.request")
	if len(reqs) != 1 || reqs[0].str("tool") != "create_ticket" {
		t.Fatalf("confirm.request: %v", evs)
	}
	args, _ := reqs[0]["args"].(map[string]any)
	if args["title"] != "Noisy grinder" || args["details"] != "[redacted]" {
		t.Errorf("confirm.request args %v, want title shown and details redacted", args)
	}
	if len(svc.created) != 0 {
		t.Fatalf("a ticket was created before the approval")
	}

	token := reqs[0].str("token")
	confirm(c, token, true)
	if done := c.next(); done.typ() != "confirm.done" || done.str("outcome") != "approved" {
		t.Fatalf("confirm answered %v", done)
	}
	evs = c.until("turn.done")
	res = ofType(evs, "tool.result")
	if len(res) != 1 || res[0]["ok"] != true || res[0]["refused"] == true {
		t.Fatalf("approved create_ticket: %v", res)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Ticket T-1 is open." {
		t.Fatalf("text.done %v", done)
	}
	svc.mu.Lock()
	created, auth := append([]string(nil), svc.created...), append([]string(nil), svc.auth...)
	svc.mu.Unlock()
	if strings.Join(created, "|") != "Noisy grinder" || strings.Join(auth, "|") != "Bearer tk-123" {
		t.Fatalf("tickets created %q with credentials %q; want exactly one, with the expanded key", created, auth)
	}
	// The model got the service's JSON as the tool's output.
	out, _ := lastResponses(t, brain.Requests()[3])[0].Response["output"].(map[string]any)
	if out["id"] != "T-1" {
		t.Fatalf("model got %v", lastResponses(t, brain.Requests()[3])[0].Response)
	}
	// The manifest's guide and schema reached the model like a built-in's.
	var declared bool
	for _, d := range brain.Requests()[0].Tools[0].FunctionDeclarations {
		declared = declared || (d.Name == "create_ticket" && d.Description == "Works with support tickets." && d.ParametersJsonSchema != nil)
	}
	if !declared || !strings.Contains(systemText(brain.Requests()[0]), "## create_ticket") {
		t.Errorf("create_ticket not declared with its guide")
	}
}

func TestHTTPToolStatusesReachTheModelAsErrorTypes(t *testing.T) {
	svc := newTicketService(t)
	dir := toolsDir(t, map[string]string{"lookup_ticket": fmt.Sprintf(lookupTicketSchema, svc.URL)})
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": dir, "TICKETS_API_KEY": "tk-9",
		"TURNSTILE_TEXT_MAX_RETRIEVAL": "20", "TURNSTILE_TEXT_MAX_CALLS": "20"})
	statuses := map[int]string{200: "", 400: "VALIDATION", 422: "VALIDATION", 401: "AUTH", 403: "AUTH", 404: "NOT_FOUND",
		408: "TIMEOUT", 504: "TIMEOUT", 429: "RATE_LIMIT", 500: "TRANSIENT", 503: "TRANSIENT", 409: "PERMANENT"}
	order := []int{200, 400, 422, 401, 403, 404, 408, 504, 429, 500, 503, 409}
	var steps []func(*fakegemini.Request) fakegemini.Reply
	for _, code := range order {
		steps = append(steps, callStep(fakegemini.Call{Name: "lookup_ticket", Args: map[string]any{"id": fmt.Sprintf("s%d", code)}}), textStep("noted"))
	}
	brain := fakegemini.NewScript(steps...)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	for i, code := range order {
		evs := c.ask(fmt.Sprintf("look up ticket %d", i))
		res := ofType(evs, "tool.result")
		if len(res) != 1 || errorType(res[0]) != statuses[code] || res[0]["refused"] == true {
			t.Errorf("HTTP %d: tool.result %v, want error type %q", code, res, statuses[code])
			continue
		}
		r := lastResponses(t, brain.Requests()[2*i+1])[0]
		typ, msg := responseError(r)
		switch {
		case code == 200:
			if out, _ := r.Response["output"].(map[string]any); out["status"] != "open" {
				t.Errorf("HTTP 200: model got %v", r.Response)
			}
		case typ != statuses[code] || !strings.Contains(msg, fmt.Sprintf("HTTP %d", code)) || !strings.Contains(msg, fmt.Sprintf("answer %d", code)):
			t.Errorf("HTTP %d: model told %s %q", code, typ, msg)
		}
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for _, a := range svc.auth {
		if a != "tk-9" {
			t.Fatalf("a request carried %q, want the expanded key", a)
		}
	}
}

func TestToolsDirWithAMissingVariableStopsTheGatewayAtStartup(t *testing.T) {
	dir := toolsDir(t, map[string]string{"create_ticket": fmt.Sprintf(createTicketSchema, "https://tickets.example")})
	_, err := gateway.LoadConfig(nil, configEnv(map[string]string{"TURNSTILE_TOOLS_DIR": dir}))
	if err == nil || !strings.Contains(err.Error(), "TURNSTILE_TOOLS_DIR="+dir) ||
		!strings.Contains(err.Error(), "tool create_ticket: schema.json: http.headers.Authorization: environment variable TICKETS_API_KEY is not set") {
		t.Fatalf("err = %v", err)
	}
	var stderr strings.Builder
	if code := realMain([]string{"-tools-dir", dir}, configEnv(nil), io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "TICKETS_API_KEY is not set") {
		t.Fatalf("gateway exit %d, stderr %s", code, stderr.String())
	}
}

// apiService is a tool's API that counts the requests it gets and answers
// them with answer.
type apiService struct {
	*httptest.Server
	calls atomic.Int32
}

func newAPIService(t *testing.T, answer http.HandlerFunc) *apiService {
	s := &apiService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		answer(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// A service slower than the manifest's timeoutMs (300 ms here, far below
// the 10 s default): the browser and the model get TIMEOUT once the
// timeout passes, the turn goes on, and the request to the service is
// abandoned rather than left running.
func TestHTTPToolSlowServiceTimesOutAfterTheManifestTimeout(t *testing.T) {
	const timeoutMs = 300
	release, abandoned := make(chan struct{}), make(chan struct{})
	svc := newAPIService(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done(): // the gateway gave up on the request
			close(abandoned)
			return
		case <-release:
		case <-time.After(5 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status": "open"}`)
	})
	t.Cleanup(func() { close(release) }) // before svc.Close, which waits for the handler
	schema := fmt.Sprintf(`{
  "name": "lookup_ticket",
  "category": "retrieval",
  "modes": ["text"],
  "timeoutMs": %d,
  "redact": {"args": ["id"], "result": ["status"]},
  "http": {"url": "%s/tickets/lookup", "method": "GET"},
  "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
}`, timeoutMs, svc.URL)
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": toolsDir(t, map[string]string{"lookup_ticket": schema})})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "lookup_ticket", Args: map[string]any{"id": "T-1"}}),
		textStep("The ticket service is not answering right now."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("what is the status of ticket T-1?")
	res := ofType(evs, "tool.result")
	if len(res) != 1 || res[0]["ok"] != false || res[0]["refused"] == true || errorType(res[0]) != "TIMEOUT" {
		t.Fatalf("tool.result %v, want a TIMEOUT error of a call that ran", res)
	}
	if ms, _ := res[0]["durationMs"].(float64); ms < timeoutMs || ms >= 3000 {
		t.Errorf("durationMs %v, want the manifest's %d ms (not the 5 s the service would take)", res[0]["durationMs"], timeoutMs)
	}
	if _, ok := res[0]["result"]; ok {
		t.Errorf("a timed-out call shows a result: %v", res[0])
	}
	if typ, _ := responseError(lastResponses(t, brain.Requests()[1])[0]); typ != "TIMEOUT" {
		t.Errorf("model got %v, want a TIMEOUT error", lastResponses(t, brain.Requests()[1])[0].Response)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "The ticket service is not answering right now." {
		t.Errorf("text.done %v: the turn should go on after the timeout", done)
	}
	select {
	case <-abandoned:
	case <-time.After(5 * time.Second):
		t.Errorf("the request to the service was not cancelled after the timeout")
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the service got %d requests, want 1 (no retry)", n)
	}
}

// An answer far over the result limit (64 KiB for the whole response to
// the model) is shaped, not passed on and not refused: the array keeps its
// leading entries whole and ends with the {"_truncated": true, "omitted": K}
// sentinel, and what the browser sees of it is the same shaped value.
func TestHTTPToolOversizedAnswerIsShapedToTheResultLimit(t *testing.T) {
	const total = 3000
	var answered atomic.Int64 // bytes of the service's answer
	svc := newAPIService(t, func(w http.ResponseWriter, r *http.Request) {
		results := make([]map[string]any, total)
		for i := range results {
			results[i] = map[string]any{"id": fmt.Sprintf("T-%d", i), "title": fmt.Sprintf("Ticket number %d", i),
				"body": strings.Repeat("The grinder makes a noise. ", 4)}
		}
		b, _ := json.Marshal(map[string]any{"total": total, "results": results})
		answered.Store(int64(len(b)))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	schema := fmt.Sprintf(`{
  "name": "search_tickets",
  "category": "retrieval",
  "modes": ["text"],
  "redact": {"args": ["query"], "result": ["total", "results"]},
  "http": {"url": "%s/tickets/search", "method": "GET"},
  "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
}`, svc.URL)
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": toolsDir(t, map[string]string{"search_tickets": schema})})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "search_tickets", Args: map[string]any{"query": "grinder"}}),
		textStep("There are many tickets about grinders."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("find the tickets about grinders")
	const limit = orchestrator.DefaultMaxResultBytes
	if n := answered.Load(); n <= 4*limit || n >= 1<<20 {
		t.Fatalf("the service answered %d bytes; the test wants several times the %d-byte limit, under httptool's 1 MiB", n, limit)
	}
	res := ofType(evs, "tool.result")
	if len(res) != 1 || res[0]["ok"] != true || res[0]["refused"] == true {
		t.Fatalf("tool.result %v, want a successful call", res)
	}
	shown, _ := res[0]["result"].(map[string]any)
	checkShaped := func(who string, out map[string]any) {
		t.Helper()
		if size := len(mustJSON(t, out)); size > limit || size < limit-2048 {
			t.Errorf("%s: %d bytes, want the %d-byte limit filled but not exceeded", who, size, limit)
		}
		if out["total"] != float64(total) {
			t.Errorf("%s: total %v, want the small member kept whole", who, out["total"])
		}
		results, _ := out["results"].([]any)
		if len(results) < 2 || len(results) >= total {
			t.Fatalf("%s: %d results, want fewer than the %d sent", who, len(results), total)
		}
		kept := len(results) - 1
		sentinel, _ := results[kept].(map[string]any)
		if sentinel["_truncated"] != true || sentinel["omitted"] != float64(total-kept) || len(sentinel) != 2 {
			t.Errorf("%s: last element %v, want {_truncated: true, omitted: %d}", who, results[kept], total-kept)
		}
		for i, r := range results[:kept] {
			if m, _ := r.(map[string]any); m["id"] != fmt.Sprintf("T-%d", i) || len(m) != 3 {
				t.Fatalf("%s: result %d is %v, want the service's entry %d whole", who, i, r, i)
			}
		}
	}
	checkShaped("browser tool.result", shown)
	resp := lastResponses(t, brain.Requests()[1])[0].Response
	if size := len(mustJSON(t, resp)); size > limit {
		t.Errorf("the response to the model is %d bytes, over the %d-byte limit", size, limit)
	}
	out, _ := resp["output"].(map[string]any)
	checkShaped("model output", out)
	if mustJSON(t, out) != mustJSON(t, shown) {
		t.Errorf("the browser was shown something other than the model's shaped output")
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "There are many tickets about grinders." {
		t.Errorf("text.done %v", done)
	}
}

// Arguments that break the manifest's parameters (a required field
// missing, a field of the wrong type, one not declared) are answered
// VALIDATION by the gateway itself: the service never hears of them. A
// valid call afterwards does reach it.
func TestHTTPToolInvalidArgumentsNeverReachTheService(t *testing.T) {
	svc := newAPIService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q, "status": "open"}`, r.URL.Query().Get("id"))
	})
	schema := fmt.Sprintf(`{
  "name": "lookup_ticket",
  "category": "retrieval",
  "modes": ["text"],
  "redact": {"args": ["id"], "result": ["status"]},
  "http": {"url": "%s/tickets/lookup", "method": "GET"},
  "parameters": {
    "type": "object",
    "properties": {"id": {"type": "string", "minLength": 3}},
    "required": ["id"],
    "additionalProperties": false
  }
}`, svc.URL)
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": toolsDir(t, map[string]string{"lookup_ticket": schema})})
	invalid := []map[string]any{
		{},                           // the required id is missing
		{"ticket": "T-1"},            // only an undeclared field
		{"id": 7},                    // the wrong type
		{"id": "T-1", "force": true}, // an undeclared field besides id
	}
	var calls []fakegemini.Call
	for _, args := range invalid {
		calls = append(calls, fakegemini.Call{Name: "lookup_ticket", Args: args})
	}
	brain := fakegemini.NewScript(
		callStep(calls...), textStep("Which ticket do you mean?"),
		callStep(fakegemini.Call{Name: "lookup_ticket", Args: map[string]any{"id": "T-1"}}), textStep("Ticket T-1 is open."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("what is the status of my ticket?")
	res := ofType(evs, "tool.result")
	if len(res) != len(invalid) {
		t.Fatalf("tool.result %v, want %d", res, len(invalid))
	}
	for _, r := range res {
		if !refusedWith(r, "VALIDATION") {
			t.Errorf("tool.result %v, want refused with VALIDATION", r)
		}
	}
	resps := lastResponses(t, brain.Requests()[1])
	if len(resps) != len(invalid) {
		t.Fatalf("model got %d responses, want %d", len(resps), len(invalid))
	}
	for i, r := range resps {
		if typ, msg := responseError(r); typ != "VALIDATION" || msg == "" {
			t.Errorf("call %d (%v): model told %s %q, want VALIDATION with what is wrong", i, invalid[i], typ, msg)
		}
	}
	if n := svc.calls.Load(); n != 0 {
		t.Fatalf("the service got %d requests for invalid arguments, want 0", n)
	}

	evs = c.ask("ticket T-1")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("valid call: tool.result %v", res)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the service got %d requests after one valid call, want 1", n)
	}
}
