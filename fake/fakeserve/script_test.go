package fakeserve

import (
	"slices"
	"testing"
)

type req struct{ q string }

func answer(s string) func(*req) string { return func(*req) string { return s } }

func TestScriptAnswersStepByStepRecordsRequestsAndSaysWhenExhausted(t *testing.T) {
	s := NewScript(func() string { return "exhausted" }, answer("one"))
	s.Push(func(r *req) string {
		s.Push(answer("three")) // a step may extend the script
		return "two to " + r.q
	})
	var got []string
	for _, q := range []string{"a", "b", "c", "d"} {
		got = append(got, s.Respond(t.Context(), &req{q}))
	}
	if want := []string{"one", "two to b", "three", "exhausted"}; !slices.Equal(got, want) {
		t.Errorf("answers = %q, want %q", got, want)
	}
	var qs []string
	for _, r := range s.Requests() {
		qs = append(qs, r.q)
	}
	if !slices.Equal(qs, []string{"a", "b", "c", "d"}) || s.Remaining() != 0 {
		t.Errorf("requests = %q, remaining %d; want all four in order and none left", qs, s.Remaining())
	}
}
