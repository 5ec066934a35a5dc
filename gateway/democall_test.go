package gateway_test

import (
	"strings"
	"testing"
)

// TestOfflineDemoCallsATypedToolThroughThePipeline types "/call NAME {args}"
// to the offline demo model (issue 13): the tool runs through the gateway's
// pipeline and the model summarises its result.
func TestOfflineDemoCallsATypedToolThroughThePipeline(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask(`/call kb_get {"id":"shipping"}`)
	calls := ofType(evs, "tool.call")
	if len(calls) != 1 || calls[0].str("name") != "kb_get" {
		t.Fatalf("want one kb_get call, got %v", evs)
	}
	if rs := ofType(evs, "tool.result"); len(rs) != 1 || rs[0]["ok"] != true {
		t.Fatalf("want kb_get to succeed, got %v", rs)
	}
	done := ofType(evs, "text.done")
	if len(done) != 1 || !strings.HasPrefix(done[0].str("text"), "The kb_get tool succeeded: ") ||
		!strings.Contains(done[0].str("text"), "ships every order") {
		t.Fatalf("answer %v, want a summary of the shipping document", done)
	}

	evs = c.ask(`/call kb_get {"id":"no-such-document"}`)
	done = ofType(evs, "text.done")
	if len(done) != 1 || !strings.HasPrefix(done[0].str("text"), "The kb_get tool failed: ") {
		t.Fatalf("answer %v, want the tool's error summarised", done)
	}

	evs = c.ask(`/call launch_rocket`)
	done = ofType(evs, "text.done")
	if len(ofType(evs, "tool.call")) != 0 || len(done) != 1 ||
		!strings.HasPrefix(done[0].str("text"), "I can't call launch_rocket: it is not declared in this session. Declared tools: ") ||
		!strings.Contains(done[0].str("text"), "kb_search") {
		t.Fatalf("answer %v, want a refusal naming the declared tools", evs)
	}
}

// TestOfflineDemoMakesSeveralTypedCallsInOneMessage types six searches in
// one "/call" (issue 21): they reach the pipeline as one model message, the
// text budget refuses the sixth, and the demo reports each outcome.
func TestOfflineDemoMakesSeveralTypedCallsInOneMessage(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask(`/call kb_search {"query":"shipping"}; kb_search {"query":"refunds"}; kb_search {"query":"payment"}; ` +
		`kb_search {"query":"gift cards"}; kb_search {"query":"subscriptions"}; kb_search {"query":"wholesale"}`)
	results := resultsInCallOrder(evs)
	if len(results) != 6 {
		t.Fatalf("%d tool results, want 6: %v", len(results), evs)
	}
	for i, r := range results[:5] {
		if r["ok"] != true {
			t.Errorf("search %d: %v, want it run", i+1, r)
		}
	}
	if !refusedWith(results[5], "BUDGET_EXCEEDED") {
		t.Errorf("sixth search: %v, want refused BUDGET_EXCEEDED", results[5])
	}
	done := ofType(evs, "text.done")
	if len(done) != 1 || strings.Count(done[0].str("text"), "The kb_search tool succeeded") != 5 ||
		!strings.Contains(done[0].str("text"), "The kb_search tool failed: ") {
		t.Fatalf("answer %v, want five successes and the refusal reported", done)
	}
}
