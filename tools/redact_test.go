package tools_test

import (
	"reflect"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
)

func TestRedactArgsKeepsOnlyAllowedValues(t *testing.T) {
	tool := bookTool(t) // args allow-list: party_size, time
	got := tool.RedactArgs(map[string]any{"party_size": 4, "time": "19:30", "name": "Ada Lovelace", "notes": "allergic to nuts"})
	want := map[string]any{"party_size": 4, "time": "19:30", "name": tools.Redacted, "notes": tools.Redacted}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RedactArgs = %v, want %v", got, want)
	}
	if tool.RedactArgs(nil) != nil {
		t.Error("RedactArgs(nil) should be nil")
	}
}

func TestRedactArgsDoesNotChangeInput(t *testing.T) {
	tool := bookTool(t)
	in := map[string]any{"name": "Ada"}
	tool.RedactArgs(in)
	if in["name"] != "Ada" {
		t.Errorf("input changed: %v", in)
	}
}

func TestEmptyAllowListShowsNothing(t *testing.T) {
	reg, err := tools.Load(toolFS(map[string][2]string{"echo": {echoSchema, echoGuide}}), map[string]tools.Handler{"echo": noop})
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := reg.Lookup("echo") // result allow-list is []
	got := echo.RedactResult(map[string]any{"text": "secret", "n": 1})
	want := map[string]any{"text": tools.Redacted, "n": tools.Redacted}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RedactResult = %v, want %v", got, want)
	}
}

func TestRedactResult(t *testing.T) {
	tool := bookTool(t) // result allow-list: booking_id
	type booking struct {
		BookingID string `json:"booking_id"`
		Phone     string `json:"phone"`
	}
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"map", map[string]any{"booking_id": "B-1", "phone": "555"}, map[string]any{"booking_id": "B-1", "phone": tools.Redacted}},
		{"struct", booking{BookingID: "B-2", Phone: "555"}, map[string]any{"booking_id": "B-2", "phone": tools.Redacted}},
		{"array", []any{"555"}, tools.Redacted},
		{"string", "555", tools.Redacted},
		{"nil", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tool.RedactResult(c.in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("RedactResult(%v) = %#v, want %#v", c.in, got, c.want)
			}
		})
	}
}
