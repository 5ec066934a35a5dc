package fakedemo

import (
	"reflect"
	"strings"
	"testing"
)

const (
	approvedNote = "[The user approved your pending call to create_ticket. Call create_ticket again now with exactly the same arguments.]"
	declinedNote = "[The user declined your pending call to create_ticket. Do not call it again with those arguments; tell the user it was not done.]"
)

func TestAnApprovedCallIsRepeatedWithItsArgumentsAndItsResultReported(t *testing.T) {
	first := Call{Name: "create_ticket", Args: map[string]any{"title": "printer on fire"}, ArgsJSON: `{"title":"printer on fire"}`}
	earlier := []Call{
		{Name: "create_ticket", Args: map[string]any{"title": "old"}, ArgsJSON: `{"title":"old"}`},
		{Name: "kb_search", Args: map[string]any{"query": "x"}, ArgsJSON: `{"query":"x"}`},
		first,
	}
	tools := append([]string{"create_ticket"}, kbTools...)
	a := Decide(Input{Text: approvedNote, LastUser: approvedNote, Tools: tools, Earlier: earlier})
	if !reflect.DeepEqual(a.Calls, []Call{first}) {
		t.Fatalf("after the approval: %+v, want the newest create_ticket call again", a)
	}
	a = Decide(Input{LastUser: approvedNote, Tools: tools, Earlier: append(earlier, first),
		Results: []Result{{Name: "create_ticket", Response: map[string]any{"output": map[string]any{"id": "T-1"}}}}})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "The create_ticket tool succeeded") || !strings.Contains(a.Text, "T-1") {
		t.Fatalf("the approved call's result: %+v, want it reported", a)
	}
}

func TestADeclinedCallIsNotRepeated(t *testing.T) {
	earlier := []Call{{Name: "create_ticket", Args: map[string]any{"title": "x"}, ArgsJSON: `{"title":"x"}`}}
	a := Decide(Input{Text: declinedNote, LastUser: declinedNote, Tools: []string{"create_ticket"}, Earlier: earlier})
	if len(a.Calls) != 0 || a.Text != "All right: I did not run create_ticket." {
		t.Fatalf("after a refusal: %+v", a)
	}
	a = Decide(Input{Text: approvedNote, LastUser: approvedNote, Tools: []string{"create_ticket"}})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "can't find my earlier call") {
		t.Fatalf("an approval without an earlier call: %+v", a)
	}
}
