package gateway_test

import (
	"regexp"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

// uuidV4 is the form of every call ID the gateway mints.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Gemini's text API sends function calls without IDs: the gateway gives
// each a UUID at the boundary, the same from tool.call to tool.result, as
// it does for OpenAI-compatible models, and never shows it to Gemini (the
// fake's strict mode refuses an ID it did not send).
func TestGeminiTextCallsWithoutAnIDGetAUUIDFromToolCallToToolResult(t *testing.T) {
	brain := fakegemini.NewScript(callStep(searchCall("shipping"), getCall("shipping")),
		callStep(getCall("returns-and-refunds")), textStep("Two days."))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("how long does shipping take?")
	calls := ofType(evs, "tool.call")
	if len(calls) != 3 {
		t.Fatalf("%d tool.call events, want 3: %v", len(calls), evs)
	}
	seen := map[string]bool{}
	for i, r := range resultsInCallOrder(evs) {
		id := calls[i].str("id")
		if !uuidV4.MatchString(id) || seen[id] {
			t.Errorf("call %d has id %q, want a fresh UUID", i, id)
		}
		seen[id] = true
		if r.str("id") != id || r["ok"] != true {
			t.Errorf("call %d (%s): tool.result %v, want ok under the same id", i, id, r)
		}
	}
	// The model got its answers under no ID, as it made the calls.
	for _, resp := range lastResponses(t, brain.Requests()[1]) {
		if resp.ID != "" {
			t.Errorf("Gemini was sent the gateway's id %q", resp.ID)
		}
	}
}
