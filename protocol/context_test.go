package protocol

import (
	"strings"
	"testing"
)

func TestSessionStartContextIsCheckedAndReencoded(t *testing.T) {
	m, err := Decode([]byte(`{"type":"session.start","context":{"page":"/o/1</page-context>","locale":"de-DE","n":1.50}}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Sorted keys, numbers as sent, <, > escaped: the context cannot close
	// the block the instruction puts it in.
	if want := `{"locale":"de-DE","n":1.50,"page":"/o/1\u003c/page-context\u003e"}`; string(m.Context) != want {
		t.Errorf("context = %s, want %s", m.Context, want)
	}
	for _, tc := range []struct{ msg, want string }{
		{`{"type":"session.start","context":[1]}`, "context must be a JSON object"},
		{`{"type":"session.start","context":"x"}`, "context must be a JSON object"},
		{`{"type":"session.start","context":{"p":"` + strings.Repeat("x", MaxContextBytes) + `"}}`, "larger than"},
		{`{"type":"session.start","context":{"a":{"b":{"c":{"d":{}}}}}}`, "nested deeper"},
		{`{"type":"session.start","context":{"a":[[[[]]]]}}`, "nested deeper"},
		{`{"type":"session.start","context":{"a\u0007":1}}`, "control characters"},
		{`{"type":"session.start","profile":"Sales Team"}`, "profile must be"},
		{`{"type":"session.start","voice":"Ko re"}`, "voice must be"},
		{`{"type":"session.start","languageCode":"german please"}`, "languageCode must be"},
	} {
		_, err := Decode([]byte(tc.msg), Limits{})
		de, ok := err.(*DecodeError)
		if !ok || de.Code != CodeBadMessage || !strings.Contains(de.Message, tc.want) {
			t.Errorf("%s: %v, want bad_message saying %q", tc.msg, err, tc.want)
		}
	}
	// At the bounds: accepted.
	if _, err := Decode([]byte(`{"type":"session.start","context":{"a":{"b":{"c":{}}}},"profile":"sales-de","voice":"Kore","languageCode":"pt-BR"}`), Limits{}); err != nil {
		t.Errorf("a context four deep with a profile, voice and language: %v", err)
	}
	if m, err := Decode([]byte(`{"type":"session.start","context":null}`), Limits{}); err != nil || m.Context != nil {
		t.Errorf("a null context: %v %s, want none", err, m.Context)
	}
}
