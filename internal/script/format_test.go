package script

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRefusesWhatCannotBeRun(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown field names its line", "turns:\n  - user: hi\n    rounds:\n      - text: hi\n        tools: []\n",
			"line 5: field tools not found"},
		{"no turns", "name: x\n", "no turns"},
		{"empty file", "", "empty file"},
		{"two documents", "turns: []\n---\nturns: []\n", "line 2: a script holds one YAML document"},
		{"turn without user", "turns:\n  - rounds: [{text: hi}]\n", "turn 1: no user message"},
		{"text round before calls", "turns:\n  - user: hi\n    rounds: [{text: a}, {calls: [{tool: kb_get}]}]\n",
			"turn 1, round 1: a round without calls is the model's final answer"},
		{"two outcomes", "turns:\n  - user: hi\n    rounds:\n      - calls: [{tool: kb_get, expect: {ran: true, refused: NOT_FOUND}}]\n      - text: a\n",
			"turn 1, round 1, call 1: expect at most one of ran, refused and confirm"},
		{"bad confirm answer", "turns:\n  - user: hi\n    rounds:\n      - calls: [{tool: t, expect: {confirm: yes}}]\n      - text: a\n",
			`confirm: "yes": want approve or deny`},
		{"confirm without the answer's turn", "turns:\n  - user: hi\n    rounds:\n      - calls: [{tool: t, expect: {confirm: approve}}]\n      - text: a\n",
			"turn 1 has a `confirm:` call: add the turn the answer starts"},
		{"error without ran", "turns:\n  - user: hi\n    rounds:\n      - calls: [{tool: t, expect: {error: TRANSIENT}}]\n      - text: a\n",
			"it needs ran: true"},
		{"no tool", "turns:\n  - user: hi\n    rounds:\n      - calls: [{args: {a: 1}}]\n      - text: a\n", "call 1: no tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tc.yaml))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "s.yaml") {
				t.Fatalf("Parse: %v, want ErrInvalid naming s.yaml and %q", err, tc.want)
			}
		})
	}
}

func TestParseReadsAConfirmationAndTheTurnItsAnswerStarts(t *testing.T) {
	s, err := Parse("c.yaml", []byte(`turns:
  - user: open a ticket
    rounds:
      - calls: [{tool: create_ticket, args: {title: Noisy}, expect: {confirm: approve}}]
      - text: approve it please
  - rounds:
      - calls: [{tool: create_ticket, args: {title: Noisy}, expect: {ran: true, result: {id: T-1}}}]
      - text: done
    expect: {text: done, reason: end_turn}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "c.yaml" || len(s.Turns) != 2 || s.Turns[0].Rounds[0].Calls[0].Expect.Confirm != "approve" ||
		*s.Turns[1].Expect.Text != "done" || s.Turns[1].Rounds[0].Calls[0].Expect.Result["id"] != "T-1" {
		t.Fatalf("parsed %+v", s)
	}
}
