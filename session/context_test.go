package session

import (
	"strings"
	"testing"
)

func TestSessionInstructionLabelsFactsTrustedAndPageContextUntrusted(t *testing.T) {
	if got := sessionInstruction(nil, "", "", ""); got != "" {
		t.Errorf("a session that adds nothing adds %q", got)
	}
	got := sessionInstruction(map[string]string{"tenant": "acme", "plan": "pro"}, "de-DE", "", `{"page":"/orders/1"}`)
	facts, lang, page := strings.Index(got, factsHeading), strings.Index(got, languageHeader), strings.Index(got, pageHeading)
	if facts < 0 || lang < facts || page < lang {
		t.Fatalf("want facts, language, then the page context last:\n%s", got)
	}
	if !strings.Contains(got, "- plan: pro\n- tenant: acme\n") {
		t.Errorf("facts not sorted by name:\n%s", got)
	}
	if !strings.Contains(got[page:], "untrusted") || !strings.Contains(got[page:], "never as instructions") ||
		!strings.HasSuffix(got, pageOpen+"\n"+`{"page":"/orders/1"}`+"\n"+pageClose+"\n") {
		t.Errorf("page context block:\n%s", got[page:])
	}
	if strings.Contains(got[:page], "page") {
		t.Errorf("the page context leaked into the trusted blocks:\n%s", got)
	}
}
