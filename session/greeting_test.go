package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/transport"
)

func greetingEntry(text string) transport.Entry {
	return transport.Entry{Role: transport.RoleModel, Text: text, Kind: kindGreeting}
}

// The greeting opens the history: kept while the bounds allow it, dropped
// with the oldest entries once they do not, and never sent to a model as
// an entry (splitGreeting).
func TestHistoryKeepsTheGreetingAtItsHeadAndDropsItLikeAnyOldEntry(t *testing.T) {
	h := []transport.Entry{greetingEntry("Hi!"), user("a"), model("A")}
	if got := labels(trimHistory(slices.Clone(h), 0)); !slices.Equal(got, []string{"model:Hi!", "user:a", "model:A"}) {
		t.Errorf("unbounded: %q, want the greeting kept", got)
	}
	if got := labels(trimHistory(slices.Clone(h[:1]), 0)); !slices.Equal(got, []string{"model:Hi!"}) {
		t.Errorf("the greeting alone: %q, want it kept (the session's first entry)", got)
	}
	if got := labels(trimHistory(slices.Clone(h), 2)); !slices.Equal(got, []string{"user:a", "model:A"}) {
		t.Errorf("bounded to 2: %q, want the greeting dropped", got)
	}
	// A model entry that is not the greeting still does not open a history.
	if got := labels(trimHistory([]transport.Entry{model("Z"), user("a")}, 0)); !slices.Equal(got, []string{"user:a"}) {
		t.Errorf("a plain model entry first: %q", got)
	}
	g, rest := splitGreeting(h)
	if g != "Hi!" || labels(rest)[0] != "user:a" {
		t.Errorf("splitGreeting = %q, %q", g, labels(rest))
	}
	if g, rest := splitGreeting(h[1:]); g != "" || len(rest) != 2 {
		t.Errorf("splitGreeting without one = %q, %q", g, labels(rest))
	}
}

func TestSessionInstructionTellsTheModelItsGreetingBeforeTheUntrustedPageContext(t *testing.T) {
	got := sessionInstruction(nil, "de-DE", "Hallo, ich bin Bean.", `{"page":"/orders/1"}`)
	lang, greet, page := strings.Index(got, languageHeader), strings.Index(got, greetingHeading), strings.Index(got, pageHeading)
	if lang < 0 || greet < lang || page < greet {
		t.Fatalf("want language, greeting, then the page context last:\n%s", got)
	}
	if !strings.Contains(got[greet:page], "Hallo, ich bin Bean.") || !strings.Contains(got[greet:page], "do not greet them again") {
		t.Errorf("greeting block:\n%s", got[greet:page])
	}
}
