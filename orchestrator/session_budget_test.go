package orchestrator_test

import (
	"testing"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// A session's own budgets (an assistant profile's) replace the
// orchestrator's in the modes they name; the other mode keeps the policy's.
func TestSessionBudgetsReplaceThePolicysInTheModesTheyName(t *testing.T) {
	f := newFixture(t)
	own := map[protocol.Mode]orchestrator.Budget{tools.ModeText: {MaxRetrieval: 1, MaxCalls: 2}}

	text := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText, Budgets: own}, 1, nil)
	res := text.Handle(t.Context(), append(searches(1, 2), utilities(1, 2)...), nil)
	for i, gate := range []string{"", "retrieval", "", "total"} {
		wantGate(t, res[i], gate, "text", map[string]int{"": 0, "retrieval": 1, "total": 2}[gate])
	}

	// Voice is not named: the default 2 retrieval / 3 calls hold.
	voice := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice, Budgets: own}, 2, nil)
	res = voice.Handle(t.Context(), append(searches(10, 3), utilities(10, 2)...), nil)
	for i, gate := range []string{"", "", "retrieval", "", "total"} {
		wantGate(t, res[i], gate, "voice", map[string]int{"": 0, "retrieval": 2, "total": 3}[gate])
	}

	// Another session without budgets of its own keeps the text default.
	other := f.orch.NewTurn(orchestrator.Session{ID: "s2", UserID: "u", Mode: tools.ModeText}, 1, nil)
	for _, r := range other.Handle(t.Context(), searches(20, 2), nil) {
		wantGate(t, r, "", "text", 0)
	}
}
