package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/signature"
)

// End-to-end tests of what tools learn about a call (docs/tools.md, "What
// a tool learns about a call", "Idempotency"): a capture server behind the
// HTTP tools, a real MCP server, a real redis-server, the browser protocol.

const (
	identityAuthSecret    = "identity-test-auth-secret-0123456789"
	identitySigningSecret = "identity-test-signing-secret-0123456789"
)

const addNoteSchema = `{
  "name": "add_note",
  "category": "action",
  "modes": ["text"],
  "redact": {"args": [], "result": []},
  "http": {"url": "%s/notes"},
  "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
}`

// captured is one request the capture server got.
type captured struct {
	path   string
	header http.Header
	body   []byte
}

// captureService stands in for the ticket API: it records every request
// and answers 503 to the first request of each path, as a flaky backend
// would (after doing the work, or not: the caller cannot know).
type captureService struct {
	*httptest.Server
	mu   sync.Mutex
	got  []captured
	seen map[string]bool
}

func newCaptureService(t *testing.T) *captureService {
	s := &captureService{seen: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, captured{path: r.URL.Path, header: r.Header.Clone(), body: b})
		first := !s.seen[r.URL.Path]
		s.seen[r.URL.Path] = true
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"message": "try again"}`)
			return
		}
		fmt.Fprint(w, `{"id": "T-1"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *captureService) requests(path string) []captured {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []captured
	for _, c := range s.got {
		if c.path == path {
			out = append(out, c)
		}
	}
	return out
}

// claimsToken is a browser token of alice with the claims tools are to get.
func claimsToken(t *testing.T) http.Header {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix(),
		"tenant": "acme", "plan": "pro", "internal": "not forwarded"}).SignedString([]byte(identityAuthSecret))
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Authorization": {"Bearer " + tok}}
}

func TestHTTPToolsLearnTheUserAndGetOneKeyForARetryAndForAnApprovedRun(t *testing.T) {
	svc := newCaptureService(t)
	dir := toolsDir(t, map[string]string{"create_ticket": fmt.Sprintf(createTicketSchema, svc.URL),
		"add_note": fmt.Sprintf(addNoteSchema, svc.URL)})
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": dir, "TICKETS_API_KEY": "tk-1",
		"REDIS_URL": "redis://" + redistest.Start(t), "TURNSTILE_AUTH_SECRET": identityAuthSecret,
		"TURNSTILE_TOOL_CLAIMS": "tenant,plan", "TURNSTILE_TOOLS_SIGNING_SECRET": identitySigningSecret})
	note := fakegemini.Call{Name: "add_note", Args: map[string]any{"text": "grinder is loud"}}
	brain := fakegemini.NewScript(
		// Turn 1: the note fails with a 503 and the model retries it.
		callStep(note), callStep(note), textStep("Noted."),
		// Turn 2: the ticket needs the user's approval.
		callStep(ticketCall("Noisy grinder")), textStep("I need your approval first."),
		// The approved run fails with a 503; retrying needs approval again.
		callStep(ticketCall("Noisy grinder")), callStep(ticketCall("Noisy grinder")), textStep("Please approve again."),
		// The second approved run succeeds.
		callStep(ticketCall("Noisy grinder")), textStep("Ticket T-1 is open."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", claimsToken(t))
	ready := c.start(nil)
	sessionID := ready.str("sessionId")

	c.ask("note that my grinder is loud")
	evs := c.ask("open a ticket for my noisy grinder")
	approve := func(evs []event) []event {
		t.Helper()
		reqs := ofType(evs, "confirm.request")
		if len(reqs) != 1 {
			t.Fatalf("confirm.request: %v", evs)
		}
		confirm(c, reqs[0].str("token"), true)
		if done := c.next(); done.typ() != "confirm.done" || done.str("outcome") != "approved" {
			t.Fatalf("confirm answered %v", done)
		}
		return c.until("turn.done")
	}
	evs = approve(evs)
	evs = approve(evs)
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Ticket T-1 is open." {
		t.Fatalf("last turn: %v", evs)
	}

	notes, tickets := svc.requests("/notes"), svc.requests("/tickets")
	if len(notes) != 2 || len(tickets) != 2 {
		t.Fatalf("the service got %d note and %d ticket requests, want 2 and 2", len(notes), len(tickets))
	}
	calls := map[string]bool{}
	for _, r := range append(notes, tickets...) {
		h := r.header
		want := map[string]string{"Turnstile-User": "alice", "Turnstile-Session": sessionID,
			"Turnstile-Claim-Tenant": "acme", "Turnstile-Claim-Plan": "pro"}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("%s %s = %q, want %q", r.path, k, got, v)
			}
		}
		if h.Get("Turnstile-Claim-Internal") != "" {
			t.Errorf("a claim not in TURNSTILE_TOOL_CLAIMS was forwarded")
		}
		if id := h.Get("Turnstile-Call"); id == "" || calls[id] {
			t.Errorf("%s Turnstile-Call %q: want a call ID of its own", r.path, id)
		} else {
			calls[id] = true
		}
		if err := signature.Verify([]byte(identitySigningSecret), h.Get("Turnstile-Signature"), r.body, time.Now(),
			signature.DefaultTolerance); err != nil {
			t.Errorf("%s signature: %v", r.path, err)
		}
	}
	noteKey, ticketKey := notes[0].header.Get("Idempotency-Key"), tickets[0].header.Get("Idempotency-Key")
	if noteKey == "" || notes[1].header.Get("Idempotency-Key") != noteKey {
		t.Errorf("the retried note has key %q, the first %q: want the same", notes[1].header.Get("Idempotency-Key"), noteKey)
	}
	if ticketKey == "" || tickets[1].header.Get("Idempotency-Key") != ticketKey {
		t.Errorf("the second approved run has key %q, the first %q: want the same", tickets[1].header.Get("Idempotency-Key"), ticketKey)
	}
	if noteKey == ticketKey {
		t.Errorf("two different actions share the key %s", noteKey)
	}
}

func TestMCPServerSeesTheUserSessionCallKeyAndClaimsInMeta(t *testing.T) {
	srv := mcptest.NewHTTP()
	t.Cleanup(srv.Close)
	cfg := configWith(t, map[string]string{"TURNSTILE_MCP_CONFIG": writeMCPConfig(t, map[string]any{"notes": map[string]any{"url": srv.URL}}),
		"TURNSTILE_AUTH_SECRET": identityAuthSecret, "TURNSTILE_TOOL_CLAIMS": "tenant"})
	brain := fakegemini.NewScript(callStep(fakegemini.Call{Name: "notes__echo", Args: map[string]any{"text": "hi"}}), textStep("Done."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", claimsToken(t))
	sessionID := c.start(nil).str("sessionId")
	evs := c.ask("say hi through the notes server")
	res := ofType(evs, "tool.result")
	if len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("echo: %v", evs)
	}
	metas := srv.Metas()
	if len(metas) != 1 {
		t.Fatalf("the MCP server saw %d calls", len(metas))
	}
	m := metas[0]
	if m["turnstile/user"] != "alice" || m["turnstile/session"] != sessionID || m["turnstile/call"] != res[0].str("id") {
		t.Errorf("_meta %v, want user alice, session %s, call %s", m, sessionID, res[0].str("id"))
	}
	if key, _ := m["turnstile/idempotencyKey"].(string); key == "" {
		t.Errorf("_meta has no idempotency key: %v", m)
	}
	if claims, _ := m["turnstile/claims"].(map[string]any); len(claims) != 1 || claims["tenant"] != "acme" {
		t.Errorf("_meta claims %v, want exactly tenant=acme", m["turnstile/claims"])
	}
}
