package fakegemini

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genai"
)

// recorder is a TB that keeps what a test would report, so that a test can
// check what Strict makes another test do.
type recorder struct {
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// finish runs the cleanups as the testing package would at a test's end.
func (r *recorder) finish() []string {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

func userContent(text string) *genai.Content { return genai.NewContentFromText(text, genai.RoleUser) }

func modelCalls(calls ...*genai.FunctionCall) *genai.Content {
	c := &genai.Content{Role: genai.RoleModel}
	for _, fc := range calls {
		c.Parts = append(c.Parts, &genai.Part{FunctionCall: fc})
	}
	return c
}

func toolResults(resps ...*genai.FunctionResponse) *genai.Content {
	c := &genai.Content{Role: genai.RoleUser}
	for _, fr := range resps {
		c.Parts = append(c.Parts, &genai.Part{FunctionResponse: fr})
	}
	return c
}

func TestStrictModeAcceptsAWellFormedToolTurn(t *testing.T) {
	brain := NewScript(
		Fixed(CallReply(Call{ID: "call-a", Name: "kb_search"}, Call{ID: "call-b", Name: "kb_get"})),
		Fixed(TextReply("Done.", 1)),
	)
	srv, base := startServer(t, brain)
	Strict(t, srv)
	c := newClient(t, base)

	contents := genai.Text("refunds?")
	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, contents, nil))
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	contents = append(contents, resps[0].Candidates[0].Content, toolResults(
		&genai.FunctionResponse{ID: "call-a", Name: "kb_search", Response: map[string]any{"output": 1}},
		&genai.FunctionResponse{ID: "call-b", Name: "kb_get", Response: map[string]any{"output": 2}}))
	if _, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, contents, nil)); err != nil {
		t.Fatalf("second stream: %v", err)
	}
	if v := srv.Violations(); len(v) != 0 {
		t.Fatalf("violations %q, want none", v)
	}
}

// TestStrictModeRefusesMalformedRESTHistory sends histories a gateway
// could get wrong; each is answered 400 INVALID_ARGUMENT without reaching
// the brain, and recorded.
func TestStrictModeRefusesMalformedRESTHistory(t *testing.T) {
	first := func() []*genai.Content {
		return []*genai.Content{userContent("refunds?"), modelCalls(
			&genai.FunctionCall{ID: "call-a", Name: "kb_search"}, &genai.FunctionCall{ID: "call-b", Name: "kb_get"})}
	}
	cases := []struct {
		name      string
		contents  []*genai.Content
		violation string
		message   string
	}{
		{"a response id the model never sent (a leaked synthetic id)",
			append(first(), toolResults(
				&genai.FunctionResponse{ID: "call-a", Name: "kb_search"},
				&genai.FunctionResponse{ID: "c1-0-1", Name: "kb_get"})),
			`id "c1-0-1", which matches no call the model made`, ""},
		{"a call answered twice",
			append(first(), toolResults(
				&genai.FunctionResponse{ID: "call-a", Name: "kb_search"},
				&genai.FunctionResponse{ID: "call-a", Name: "kb_search"})),
			`answers call "call-a" a second time`, ""},
		{"fewer responses than calls",
			append(first(), toolResults(&genai.FunctionResponse{ID: "call-a", Name: "kb_search"})),
			"1 functionResponse parts answer 2 functionCall parts", msgResponseCount},
		{"responses without a call turn before them",
			[]*genai.Content{userContent("hi"), toolResults(&genai.FunctionResponse{Name: "kb_search"})},
			"do not follow a model content with functionCall parts", msgResponseAfterCall},
		{"a call the model never made in the history",
			[]*genai.Content{userContent("hi"), modelCalls(&genai.FunctionCall{ID: "made-up", Name: "kb_get"}),
				toolResults(&genai.FunctionResponse{ID: "made-up", Name: "kb_get"})},
			`functionCall kb_get has id "made-up", which the model never sent`, ""},
		{"a response naming no call of the turn",
			append(first(), toolResults(
				&genai.FunctionResponse{ID: "call-a", Name: "kb_search"},
				&genai.FunctionResponse{Name: "create_ticket"})),
			"functionResponse create_ticket", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brain := NewScript(Fixed(CallReply(Call{ID: "call-a", Name: "kb_search"}, Call{ID: "call-b", Name: "kb_get"})),
				Fixed(TextReply("never", 1)))
			srv, base := startServer(t, brain)
			srv.SetStrict(true)
			c := newClient(t, base)
			if _, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("refunds?"), nil)); err != nil {
				t.Fatalf("first stream: %v", err)
			}

			_, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, tc.contents, nil))
			apiErr := asAPIError(t, err)
			if apiErr.Code != 400 || apiErr.Status != "INVALID_ARGUMENT" {
				t.Errorf("error = %+v, want 400 INVALID_ARGUMENT", apiErr)
			}
			if tc.message != "" && apiErr.Message != tc.message {
				t.Errorf("message = %q, want the real API's %q", apiErr.Message, tc.message)
			}
			if brain.Remaining() != 1 {
				t.Errorf("the brain answered the refused request")
			}
			v := srv.Violations()
			if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), tc.violation) {
				t.Errorf("violations %q, want one saying %q", v, tc.violation)
			}
		})
	}
}

func TestLenientByDefaultMalformedHistoryReachesTheBrain(t *testing.T) {
	brain := NewScript(Fixed(TextReply("fine", 1)))
	srv, base := startServer(t, brain)
	c := newClient(t, base)
	contents := []*genai.Content{userContent("hi"), toolResults(&genai.FunctionResponse{ID: "nope", Name: "kb_search"})}
	if _, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, contents, nil)); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(brain.Requests()) != 1 || len(srv.Violations()) != 0 {
		t.Errorf("brain saw %d requests, violations %q; want the request answered and nothing recorded",
			len(brain.Requests()), srv.Violations())
	}
}

func TestStrictFailsTheTestListingEveryViolation(t *testing.T) {
	srv, base := startServer(t, NewScript(Fixed(TextReply("never", 1))))
	rec := &recorder{}
	Strict(rec, srv)
	c := newClient(t, base)
	contents := []*genai.Content{userContent("hi"), toolResults(&genai.FunctionResponse{ID: "nope", Name: "kb_search"})}
	if _, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, contents, nil)); err == nil {
		t.Fatal("malformed request succeeded in strict mode")
	}
	errs := rec.finish()
	if len(errs) != 1 || !strings.Contains(errs[0], "2 protocol violation(s)") ||
		!strings.Contains(errs[0], `id "nope"`) || !strings.Contains(errs[0], "do not follow a model content") {
		t.Fatalf("the test would report %q, want both violations listed", errs)
	}

	quiet, _ := startServer(t, NewScript())
	clean := &recorder{}
	Strict(clean, quiet)
	if errs := clean.finish(); len(errs) != 0 {
		t.Errorf("a server without violations fails the test with %q", errs)
	}
}
