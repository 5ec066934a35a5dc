package fakegemini

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/genai"
)

// strictState is the Server's strict mode (see Strict).
type strictState struct {
	on atomic.Bool

	mu         sync.Mutex
	violations []string
	restCalls  map[string]bool // ids of function calls the REST model sent
}

// SetStrict turns strict mode on or off for requests and connections that
// start afterwards. Most tests call Strict instead.
func (s *Server) SetStrict(on bool) { s.strict.on.Store(on) }

// Violations returns what strict mode found wrong so far, in order, one
// human-readable line each.
func (s *Server) Violations() []string {
	s.strict.mu.Lock()
	defer s.strict.mu.Unlock()
	return append([]string(nil), s.strict.violations...)
}

// violate records a violation (strict mode only) and logs it.
func (s *Server) violate(format string, args ...any) {
	if !s.strict.on.Load() {
		return
	}
	v := fmt.Sprintf(format, args...)
	s.log.Warn("fake gemini: protocol violation", "violation", v)
	s.strict.mu.Lock()
	defer s.strict.mu.Unlock()
	s.strict.violations = append(s.strict.violations, v)
}

// TB is the part of testing.TB that Strict uses (so that this package
// does not link the testing package into binaries).
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// Strict turns strict mode on for s and makes t fail at its end, listing
// every violation, if the fake saw any malformed request. Call it right
// after starting the server.
//
// Strict mode holds clients to the protocol rules the real service
// enforces, or that a client must keep to behave well, and records every
// breach as a violation (Server.Violations). It is off by default: a
// lenient fake answers what it can. Violations are also logged (WARN
// "fake gemini: protocol violation"), which is how cmd/fakegemini -strict
// reports them.
//
// What strict mode checks, and how the fake then reacts:
//
//   - REST history (every generateContent / streamGenerateContent request):
//     a user content with functionResponse parts must come right after a
//     model content with functionCall parts, with as many responses as
//     calls, each answering one of the calls by name (and by id when the
//     model gave ids). The fake answers 400 INVALID_ARGUMENT with the real
//     API's messages for these ("Please ensure that function response turn
//     comes immediately after a function call turn." / "Please ensure that
//     the number of function response parts is equal to the number of
//     function call parts of the function call turn."), which public
//     reports show the Gemini API sending.
//   - REST ids: a functionCall or functionResponse id the fake never sent
//     (e.g. an id a gateway invented and leaked), or one id answered twice
//     in the history. Also answered 400 INVALID_ARGUMENT; how the real API
//     reacts is not documented (it usually sends no ids at all), so that
//     reaction is assumed.
//   - Live setup: a model name that is not "models/{id}" (Gemini API) or
//     "projects/{p}/locations/{l}/publishers/{pub}/models/{id}" (Vertex AI).
//     The fake closes with 1007 "Request contains an invalid argument."
//     whether strict or not (assumed; the real service refuses such a
//     setup, reports differ on how).
//   - Live tool responses: an id that matches no toolCall of this
//     connection, a response without an id, or a second response to a call
//     already answered (a response with willContinue: true keeps a
//     NON_BLOCKING call open; a late answer to a call the model cancelled
//     is tolerated once, since the two can cross on the wire). The fake
//     closes with 1007 "Request contains an invalid argument.", which is
//     what public reports show for malformed tool responses (assumed for
//     unknown ids).
//   - Live clientContent while the model is speaking: between the first
//     model output of a turn (a modelTurn part, an outputTranscription or a
//     toolCall written to the socket) and that turn's turnComplete. The
//     real service accepts it and interrupts the generation (documented),
//     so the fake only records it and delivers the event as usual.
func Strict(t TB, s *Server) {
	t.Helper()
	s.SetStrict(true)
	t.Cleanup(func() {
		if v := s.Violations(); len(v) > 0 {
			t.Errorf("the fake Gemini server saw %d protocol violation(s):\n  %s", len(v), strings.Join(v, "\n  "))
		}
	})
}

// noteRESTCalls remembers the ids of the function calls a REST reply
// carries, so that strict mode can tell them from invented ones.
func (s *Server) noteRESTCalls(r Reply) {
	if !s.strict.on.Load() {
		return
	}
	s.strict.mu.Lock()
	defer s.strict.mu.Unlock()
	for _, c := range r.Chunks {
		for _, call := range c.Calls {
			if call.ID == "" {
				continue
			}
			if s.strict.restCalls == nil {
				s.strict.restCalls = make(map[string]bool)
			}
			s.strict.restCalls[call.ID] = true
		}
	}
}

func (s *Server) restCallMade(id string) bool {
	s.strict.mu.Lock()
	defer s.strict.mu.Unlock()
	return s.strict.restCalls[id]
}

const (
	msgResponseAfterCall = "Please ensure that function response turn comes immediately after a function call turn."
	msgResponseCount     = "Please ensure that the number of function response parts is equal to the number of " +
		"function call parts of the function call turn."
)

// checkContents applies strict mode's REST history rules. It returns the
// 400 reply to send instead of asking the brain, or nil when the history
// is well formed (or strict mode is off).
func (s *Server) checkContents(contents []*genai.Content) *Reply {
	if !s.strict.on.Load() {
		return nil
	}
	var found []string
	answered := map[string]int{} // call id -> content index of its response
	for i, c := range contents {
		if c == nil {
			continue
		}
		calls, resps := functionParts(c)
		for _, fc := range calls {
			if fc.ID != "" && !s.restCallMade(fc.ID) {
				found = append(found, fmt.Sprintf("contents[%d]: functionCall %s has id %q, which the model never sent", i, fc.Name, fc.ID))
			}
		}
		if len(resps) == 0 {
			continue
		}
		var prev []*genai.FunctionCall
		if i > 0 && contents[i-1] != nil && contents[i-1].Role == genai.RoleModel {
			prev, _ = functionParts(contents[i-1])
		}
		switch {
		case len(prev) == 0:
			found = append(found, fmt.Sprintf("contents[%d]: functionResponse parts do not follow a model content with functionCall parts: %s", i, msgResponseAfterCall))
		case len(prev) != len(resps):
			found = append(found, fmt.Sprintf("contents[%d]: %d functionResponse parts answer %d functionCall parts: %s", i, len(resps), len(prev), msgResponseCount))
		}
		for _, fr := range resps {
			found = append(found, checkResponse(i, fr, prev, answered, s.restCallMade)...)
		}
	}
	if len(found) == 0 {
		return nil
	}
	for _, v := range found {
		s.violate("REST %s", v)
	}
	msg := found[0]
	if _, real, ok := strings.Cut(msg, ": Please"); ok {
		msg = "Please" + real // the real API's own wording
	}
	r := ErrorReply(http.StatusBadRequest, "INVALID_ARGUMENT", msg)
	return &r
}

// checkResponse checks one functionResponse of contents[i] against the
// calls it answers.
func checkResponse(i int, fr *genai.FunctionResponse, calls []*genai.FunctionCall, answered map[string]int, made func(string) bool) []string {
	var found []string
	named := false
	for _, fc := range calls {
		if fc.Name == fr.Name && (fr.ID == "" || fc.ID == fr.ID) {
			named = true
		}
	}
	if !named && len(calls) > 0 {
		found = append(found, fmt.Sprintf("contents[%d]: functionResponse %s (id %q) answers no functionCall of the turn before it", i, fr.Name, fr.ID))
	}
	if fr.ID == "" {
		return found
	}
	if !made(fr.ID) {
		found = append(found, fmt.Sprintf("contents[%d]: functionResponse %s has id %q, which matches no call the model made", i, fr.Name, fr.ID))
	}
	if j, dup := answered[fr.ID]; dup {
		found = append(found, fmt.Sprintf("contents[%d]: functionResponse %s answers call %q a second time (first in contents[%d])", i, fr.Name, fr.ID, j))
	} else {
		answered[fr.ID] = i
	}
	return found
}

// functionParts returns the functionCall and functionResponse parts of c.
func functionParts(c *genai.Content) ([]*genai.FunctionCall, []*genai.FunctionResponse) {
	var calls []*genai.FunctionCall
	var resps []*genai.FunctionResponse
	for _, p := range c.Parts {
		switch {
		case p == nil:
		case p.FunctionCall != nil:
			calls = append(calls, p.FunctionCall)
		case p.FunctionResponse != nil:
			resps = append(resps, p.FunctionResponse)
		}
	}
	return calls, resps
}
