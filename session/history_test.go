package session

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/turnstile-gw/turnstile/transport"
)

func user(text string) transport.Entry { return transport.Entry{Role: transport.RoleUser, Text: text} }
func model(text string) transport.Entry {
	return transport.Entry{Role: transport.RoleModel, Text: text}
}
func modelCall(id string) transport.Entry {
	return transport.Entry{Role: transport.RoleModel, Calls: []transport.FunctionCall{{ID: id, Name: "kb_search"}}}
}
func toolResult(id string) transport.Entry {
	return transport.Entry{Role: transport.RoleTool, Results: []transport.FunctionResult{{ID: id, Name: "kb_search"}}}
}

// label names an entry for comparisons: role plus text or call id.
func label(e transport.Entry) string {
	switch {
	case len(e.Calls) > 0:
		return "call:" + e.Calls[0].ID
	case len(e.Results) > 0:
		return "result:" + e.Results[0].ID
	default:
		return string(e.Role) + ":" + e.Text
	}
}

func labels(h []transport.Entry) []string {
	out := make([]string, len(h))
	for i, e := range h {
		out[i] = label(e)
	}
	return out
}

func TestTrimHistory(t *testing.T) {
	cases := []struct {
		name string
		in   []transport.Entry
		max  int
		want []string
	}{
		{"under the limit unchanged",
			[]transport.Entry{user("a"), model("A")}, 5,
			[]string{"user:a", "model:A"}},
		{"keeps the newest entries",
			[]transport.Entry{user("a"), model("A"), user("b"), model("B"), user("c"), model("C")}, 4,
			[]string{"user:b", "model:B", "user:c", "model:C"}},
		{"cut landing on a model entry moves to the next user entry",
			[]transport.Entry{user("a"), model("A"), user("b"), model("B")}, 3,
			[]string{"user:b", "model:B"}},
		{"never starts inside a tool round",
			[]transport.Entry{user("a"), modelCall("1"), toolResult("1"), model("A"), user("b"), model("B")}, 5,
			[]string{"user:b", "model:B"}},
		{"cut landing on a tool result drops its round",
			[]transport.Entry{user("a"), modelCall("1"), toolResult("1"), model("A"), user("b"), modelCall("2"), toolResult("2"), model("B")}, 6,
			[]string{"user:b", "call:2", "result:2", "model:B"}},
		{"loaded history starting with a tool result",
			[]transport.Entry{toolResult("0"), model("Z"), user("a"), model("A")}, 0,
			[]string{"user:a", "model:A"}},
		{"no limit keeps everything from the first user entry",
			[]transport.Entry{user("a"), model("A"), user("b")}, 0,
			[]string{"user:a", "model:A", "user:b"}},
		{"nothing left when no user entry survives",
			[]transport.Entry{user("a"), modelCall("1"), toolResult("1"), model("A")}, 3,
			[]string{}},
		{"empty", nil, 10, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := labels(trimHistory(tc.in, tc.max)); !slices.Equal(got, tc.want) {
				t.Errorf("trimHistory(%q, %d) = %q, want %q", labels(tc.in), tc.max, got, tc.want)
			}
		})
	}
}

// For any history, the trimmed one is the longest suffix that fits the
// limit and starts at a user entry.
func TestTrimHistoryIsLongestValidSuffix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		h := make([]transport.Entry, r.IntN(30))
		for i := range h {
			switch r.IntN(4) {
			case 0:
				h[i] = user("u")
			case 1:
				h[i] = model("m")
			case 2:
				h[i] = modelCall("c")
			default:
				h[i] = toolResult("c")
			}
		}
		max := r.IntN(12)
		got := trimHistory(slices.Clone(h), max)

		if max > 0 && len(got) > max {
			t.Fatalf("case %d: %d entries kept, limit %d", n, len(got), max)
		}
		if len(got) > 0 && got[0].Role != transport.RoleUser {
			t.Fatalf("case %d: trimmed history %q starts with %s", n, labels(got), got[0].Role)
		}
		if !slices.Equal(labels(got), labels(h[len(h)-len(got):])) {
			t.Fatalf("case %d: %q is not a suffix of %q", n, labels(got), labels(h))
		}
		window := h
		if max > 0 && len(h) > max {
			window = h[len(h)-max:]
		}
		for _, e := range window[:len(window)-len(got)] {
			if e.Role == transport.RoleUser {
				t.Fatalf("case %d: trimHistory(%q, %d) = %q dropped a user entry it could have started at",
					n, labels(h), max, labels(got))
			}
		}
	}
}
