package geminitext_test

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

func TestContentsMergesConsecutiveUserEntries(t *testing.T) {
	// A failed turn leaves its user message behind; the next one follows it.
	got := geminitext.Contents([]transport.Entry{
		{Role: transport.RoleUser, Text: "where is my order?"},
		{Role: transport.RoleUser, Text: "hello?"},
	})
	if len(got) != 1 || got[0].Role != genai.RoleUser {
		t.Fatalf("contents = %s, want one user content", describe(got))
	}
	if texts := partTexts(got[0]); !reflect.DeepEqual(texts, []string{"where is my order?", "hello?"}) {
		t.Errorf("parts = %q, want both messages in order", texts)
	}
}

func TestContentsSkipsEmptyModelEntry(t *testing.T) {
	got := geminitext.Contents([]transport.Entry{
		{Role: transport.RoleUser, Text: "one"},
		{Role: transport.RoleModel},
		{Role: transport.RoleUser, Text: "two"},
	})
	if len(got) != 1 || !reflect.DeepEqual(partTexts(got[0]), []string{"one", "two"}) {
		t.Fatalf("contents = %s, want a single user content: an empty model entry has nothing to send", describe(got))
	}
}

func TestContentsAlternateRolesWithToolResultsAsUserFunctionResponses(t *testing.T) {
	args := map[string]any{"query": "refunds"}
	result := map[string]any{"output": map[string]any{"results": []any{}}}
	got := geminitext.Contents([]transport.Entry{
		{Role: transport.RoleUser, Text: "how do refunds work?"},
		{Role: transport.RoleModel, Text: "Let me check.", Calls: []transport.FunctionCall{
			{ID: "fc-1", Name: "kb_search", Args: args}}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{{ID: "fc-1", Name: "kb_search", Response: result}}},
		{Role: transport.RoleModel, Text: "Refunds take five days."},
	})
	if len(got) != 4 {
		t.Fatalf("contents = %s, want user, model, user(function response), model", describe(got))
	}
	wantRoles := []string{genai.RoleUser, genai.RoleModel, genai.RoleUser, genai.RoleModel}
	for i, c := range got {
		if c.Role != wantRoles[i] {
			t.Errorf("content %d role = %q, want %q", i, c.Role, wantRoles[i])
		}
	}
	model := got[1]
	if len(model.Parts) != 2 || model.Parts[0].Text != "Let me check." || model.Parts[1].FunctionCall == nil {
		t.Fatalf("model content = %s, want its text then its call", describe(got[1:2]))
	}
	fc := model.Parts[1].FunctionCall
	if fc.ID != "fc-1" || fc.Name != "kb_search" || !reflect.DeepEqual(fc.Args, args) {
		t.Errorf("call = %+v, want kb_search fc-1 with the args", *fc)
	}
	tool := got[2]
	if len(tool.Parts) != 1 || tool.Parts[0].FunctionResponse == nil || tool.Parts[0].Text != "" {
		t.Fatalf("tool content = %s, want exactly one functionResponse part", describe(got[2:3]))
	}
	fr := tool.Parts[0].FunctionResponse
	if fr.ID != "fc-1" || fr.Name != "kb_search" || !reflect.DeepEqual(fr.Response, result) {
		t.Errorf("function response = %+v, want the result under its call's id and name", *fr)
	}
}

func TestContentsDropSyntheticIDsAndKeepRealOnes(t *testing.T) {
	got := geminitext.Contents([]transport.Entry{
		{Role: transport.RoleUser, Text: "q"},
		{Role: transport.RoleModel, Calls: []transport.FunctionCall{
			{ID: "c1-0-0", Name: "kb_search", Args: map[string]any{"query": "a"}, Synthetic: true},
			{ID: "real-7", Name: "kb_get", Args: map[string]any{"id": "b"}},
		}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{
			{ID: "c1-0-0", Name: "kb_search", Response: map[string]any{"output": 1}},
			{ID: "real-7", Name: "kb_get", Response: map[string]any{"output": 2}},
		}},
	})
	if len(got) != 3 || len(got[1].Parts) != 2 || len(got[2].Parts) != 2 {
		t.Fatalf("contents = %s, want user, model with 2 calls, user with 2 responses", describe(got))
	}
	calls := []*genai.FunctionCall{got[1].Parts[0].FunctionCall, got[1].Parts[1].FunctionCall}
	resps := []*genai.FunctionResponse{got[2].Parts[0].FunctionResponse, got[2].Parts[1].FunctionResponse}
	for i, want := range []struct{ id, name string }{{"", "kb_search"}, {"real-7", "kb_get"}} {
		if calls[i] == nil || calls[i].ID != want.id || calls[i].Name != want.name {
			t.Errorf("call %d = %+v, want %s with id %q", i, calls[i], want.name, want.id)
		}
		if resps[i] == nil || resps[i].ID != want.id || resps[i].Name != want.name {
			t.Errorf("response %d = %+v, want %s with id %q", i, resps[i], want.name, want.id)
		}
	}
}

func TestContentsOfEmptyHistoryIsEmpty(t *testing.T) {
	if got := geminitext.Contents(nil); len(got) != 0 {
		t.Errorf("Contents(nil) = %s, want nothing", describe(got))
	}
}

func partTexts(c *genai.Content) []string {
	var out []string
	for _, p := range c.Parts {
		out = append(out, p.Text)
	}
	return out
}

// describe renders contents compactly for failure messages.
func describe(cs []*genai.Content) string {
	s := "["
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += c.Role + "{"
		for j, p := range c.Parts {
			if j > 0 {
				s += " "
			}
			switch {
			case p.FunctionCall != nil:
				s += "call:" + p.FunctionCall.Name + "#" + p.FunctionCall.ID
			case p.FunctionResponse != nil:
				s += "resp:" + p.FunctionResponse.Name + "#" + p.FunctionResponse.ID
			default:
				s += "text:" + p.Text
			}
		}
		s += "}"
	}
	return s + "]"
}

// Gemini has no system role inside contents: the gateway's reminders move
// to the system instruction's turn note (each text once), the plain answer
// each corrects leaves the contents, and everything else stays in order.
func TestRemindersMoveToTheTurnNoteAndTheirRejectedAnswersLeave(t *testing.T) {
	call := transport.FunctionCall{ID: "c1", Name: "kb_search"}
	hist := []transport.Entry{
		{Role: transport.RoleUser, Text: "hi"},
		{Role: transport.RoleModel, Text: "plain 1"},
		{Role: transport.RoleSystem, Text: "USE finish."},
		{Role: transport.RoleModel, Calls: []transport.FunctionCall{call}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{{ID: "c1", Name: "kb_search"}}},
		{Role: transport.RoleModel, Text: "plain 2"},
		{Role: transport.RoleSystem, Text: "USE finish."},
	}
	system, kept := geminitext.FoldReminders("BASE", hist)
	if system != "BASE\n\n# Note for this turn\nUSE finish." {
		t.Errorf("system %q", system)
	}
	var roles []string
	for _, e := range kept {
		roles = append(roles, string(e.Role)+":"+e.Text)
	}
	if got := strings.Join(roles, "|"); got != "user:hi|model:|tool:" {
		t.Errorf("contents kept %s, want the user's message, the call and its result", got)
	}
	if len(hist) != 7 || hist[1].Text != "plain 1" {
		t.Errorf("the history passed in was modified: %+v", hist)
	}
	if s, k := geminitext.FoldReminders("BASE", hist[:1]); s != "BASE" || len(k) != 1 {
		t.Errorf("without reminders: %q %+v, want them unchanged", s, k)
	}
}

// BenchmarkContents converts a history of 200 entries (100 exchanges, every
// tenth with a tool round), as a long conversation's every request does.
//
//	go test -run '^$' -bench BenchmarkContents -benchmem ./transport/geminitext
func BenchmarkContents(b *testing.B) {
	var h []transport.Entry
	for i := 0; len(h) < 200; i++ {
		h = append(h, transport.Entry{Role: transport.RoleUser, Text: "when do you ship?"})
		if i%10 == 0 {
			h = append(h,
				transport.Entry{Role: transport.RoleModel, Calls: []transport.FunctionCall{
					{ID: "fc", Name: "kb_search", Args: map[string]any{"query": "shipping"}}}},
				transport.Entry{Role: transport.RoleTool, Results: []transport.FunctionResult{
					{ID: "fc", Name: "kb_search", Response: map[string]any{"output": "two days"}}}})
		}
		h = append(h, transport.Entry{Role: transport.RoleModel, Text: "Beans ship within two business days of roasting."})
	}
	b.ReportAllocs()
	for b.Loop() {
		geminitext.Contents(h)
	}
}
