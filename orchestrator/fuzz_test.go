package orchestrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// fuzzBudget is the result budget of the text orchestrator under fuzzing,
// small so that modest inputs exercise shaping.
const fuzzBudget = 512

// FuzzArgumentPath feeds arbitrary JSON objects as the arguments of a tool
// with a real schema through NewTurn and Handle: the pipeline never panics,
// arguments that are the same canonically get the same answer, and the
// model response never exceeds the result budget.
func FuzzArgumentPath(f *testing.F) {
	for _, seed := range []string{
		`{"query": "weather in Oslo"}`,
		`{"query": "weather", "limit": 3}`,
		`{"limit": 3.0, "query": "x"}`,
		`{"query": ""}`,
		`{"query": 7}`,
		`{"query": "x", "limit": 51}`,
		`{"query": "x", "limit": 1e400}`,
		`{"query": "x", "colour": "red", "size": [1, {"a": null}]}`,
		`{"query": "x", "query": "y"}`,
		`{"query": "\u0000\ud800 <script>&amp;"}`,
		`{"query": "` + strings.Repeat("long ", 200) + `"}`,
		`{}`,
		`null`,
	} {
		f.Add(seed)
	}
	fx := newFixture(f)
	variants := []struct {
		o      *orchestrator.Orchestrator
		mode   protocol.Mode
		budget int
	}{
		{fx.with(orchestrator.Config{MaxResultBytes: fuzzBudget}, orchestrator.Deps{}), tools.ModeText, fuzzBudget},
		{fx.orch, tools.ModeVoice, orchestrator.DefaultMaxResultBytes},
	}
	f.Fuzz(func(t *testing.T, raw string) {
		args, ok := decodeArgs([]byte(raw))
		if !ok {
			return // not a JSON object: the provider adapter never passes these on
		}
		var canonArgs map[string]any
		if b, err := json.Marshal(args); err == nil {
			if canon, err := tools.CanonicalArgs(b); err == nil {
				canonArgs, _ = decodeArgs(canon)
			}
		}
		for _, v := range variants {
			first := fuzzCall(t, v.o, v.mode, args)
			resp := responseJSON(t, first)
			if len(resp) > v.budget {
				t.Errorf("%s: response is %d bytes, over the %d-byte budget", v.mode, len(resp), v.budget)
			}
			if canonArgs == nil {
				continue
			}
			second := fuzzCall(t, v.o, v.mode, canonArgs)
			if again := responseJSON(t, second); !bytes.Equal(resp, again) || first.Refused != second.Refused {
				t.Errorf("%s: args %s and their canonical form got different answers:\n%s\n%s", v.mode, raw, resp, again)
			}
		}
	})
}

// fuzzCall runs one search call as the first call of a fresh turn.
func fuzzCall(t *testing.T, o *orchestrator.Orchestrator, mode protocol.Mode, args map[string]any) orchestrator.Outcome {
	t.Helper()
	tr := o.NewTurn(orchestrator.Session{ID: "fuzz", UserID: "u", Mode: mode}, 1, nil)
	res := tr.Handle(context.Background(), []orchestrator.Call{call("c", "search", args)}, nil)
	if len(res) != 1 || !res[0].Send || res[0].Outcome.Response == nil {
		t.Fatalf("Handle = %+v, want one answer to send", res)
	}
	return res[0].Outcome
}

// decodeArgs decodes a JSON object as a provider adapter does (numbers
// exact); ok is false for anything else.
func decodeArgs(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || dec.More() {
		return nil, false
	}
	return m, true
}
