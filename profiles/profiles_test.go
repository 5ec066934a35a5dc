package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
)

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var check = Check{Tool: func(n string) bool { return n == "kb_search" || n == "finish" }, Voices: []string{"Kore"}}

func TestLoadReadsProfilesAndNamesTheFileOfAnError(t *testing.T) {
	set, err := Load(write(t, map[string]string{
		"sales-de.json": `{"systemPrompt":"Du verkaufst Kaffee.","tools":["kb_search"],"voice":"Kore","languageCode":"de-DE"}`,
		"README.md":     "not a profile",
	}), check)
	if err != nil {
		t.Fatal(err)
	}
	p := set["sales-de"]
	if p == nil || p.SystemPrompt != "Du verkaufst Kaffee." || p.Voice != "Kore" || p.LanguageCode != "de-DE" ||
		len(p.Tools) != 1 || len(set) != 1 {
		t.Fatalf("loaded %v", set)
	}
	for _, tc := range []struct{ file, body, want string }{
		{"a.json", `{"prompt":"x"}`, "unknown field"},
		{"a.json", `{"tools":["rm_rf"]}`, `no tool "rm_rf"`},
		{"a.json", `{"voice":"Brian"}`, "TURNSTILE_LIVE_VOICES"},
		{"a.json", `{"languageCode":"german"}`, "BCP-47"},
		{"Sales.json", `{}`, "file name must be a profile name"},
	} {
		_, err := Load(write(t, map[string]string{tc.file: tc.body}), check)
		if err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want an error naming the file and %q", tc.file, tc.body, err, tc.want)
		}
	}
	if _, err := Load(write(t, nil), check); err == nil {
		t.Error("an empty folder loaded")
	}
}

func TestLoadReadsBudgetsPerModeAndRefusesBadOnesNamingTheField(t *testing.T) {
	set, err := Load(write(t, map[string]string{
		"support.json": `{"budgets":{"text":{"maxRetrieval":1,"maxCalls":3}}}`,
		"plain.json":   `{}`,
	}), check)
	if err != nil {
		t.Fatal(err)
	}
	if got := set["support"].Budgets; len(got) != 1 || got["text"] != (tools.Budget{MaxRetrieval: 1, MaxCalls: 3}) {
		t.Errorf("support budgets %+v, want text 1/3 only", got)
	}
	if got := set["plain"].Budgets; got != nil {
		t.Errorf("a profile without budgets has %+v, want none (the gateway's)", got)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"budgets":{"chat":{"maxRetrieval":1,"maxCalls":3}}}`, "budgets.chat: unknown mode"},
		{`{"budgets":{"voice":{"maxCalls":3}}}`, "budgets.voice: a budget sets both maxRetrieval and maxCalls"},
		{`{"budgets":{"text":{"maxRetrieval":4,"maxCalls":3}}}`, "budgets.text: maxRetrieval (4) must not exceed maxCalls (3)"},
		{`{"budgets":{"text":{"maxRetrieval":-1,"maxCalls":3}}}`, "budgets.text: maxRetrieval (-1) must be from 0"},
		{`{"budgets":{"text":{"maxRetrieval":1,"maxCalls":3,"maxMs":5}}}`, "unknown field"},
		{`{"budgets":{"text":{"maxRetrieval":"one","maxCalls":3}}}`, "maxRetrieval"},
	} {
		_, err := Load(write(t, map[string]string{"a.json": tc.body}), check)
		if err == nil || !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming a.json and %q", tc.body, err, tc.want)
		}
	}
}

func TestLoadReadsAGreetingAndRefusesABadOne(t *testing.T) {
	set, err := Load(write(t, map[string]string{"support.json": `{"greeting":"Hi, I am Bean.\nHow can I help?"}`}), check)
	if err != nil || set["support"].Greeting != "Hi, I am Bean.\nHow can I help?" {
		t.Fatalf("loaded %+v, %v", set["support"], err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"greeting":"   "}`, "greeting: blank"},
		{`{"greeting":"` + strings.Repeat("é", MaxGreetingChars+1) + `"}`, "greeting: 1001 characters, at most 1000"},
		{`{"greeting":"Hi\u0007"}`, "greeting: holds control characters"},
		{`{"greeting":["Hi"]}`, "greeting"},
	} {
		_, err := Load(write(t, map[string]string{"a.json": tc.body}), check)
		if err == nil || !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40s: %v, want an error naming a.json and %q", tc.body, err, tc.want)
		}
	}
}
