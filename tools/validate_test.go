package tools_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
)

const bookSchema = `{
  "name": "book_table",
  "category": "action",
  "modes": ["text", "voice"],
  "requiresConfirmation": true,
  "redact": {"args": ["party_size", "time"], "result": ["booking_id"]},
  "parameters": {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
      "party_size": {"type": "integer", "minimum": 1, "maximum": 12},
      "name": {"type": "string", "minLength": 1, "maxLength": 40},
      "time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
      "seating": {"enum": ["inside", "terrace"]},
      "options": {
        "type": "object",
        "properties": {"high_chair": {"type": "boolean"}},
        "additionalProperties": false
      },
      "notes": {"type": ["string", "null"], "maxLength": 200},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
    },
    "required": ["party_size", "name"],
    "additionalProperties": false
  }
}`

func bookTool(t testing.TB) *tools.Tool {
	t.Helper()
	reg, err := tools.Load(toolFS(map[string][2]string{"book_table": {bookSchema, "# Book\n\nBooks a table.\n"}}),
		map[string]tools.Handler{"book_table": noop})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := reg.Lookup("book_table")
	return tool
}

func TestValidateArgsAccepts(t *testing.T) {
	tool := bookTool(t)
	for _, raw := range []string{
		`{"party_size": 2, "name": "Ada"}`,
		`{"party_size": 12, "name": "Ada", "time": "19:30", "seating": "terrace", "options": {"high_chair": true}, "notes": null, "tags": ["birthday"]}`,
		` {"party_size": 2.0, "name": "Ada"} `,
	} {
		if err := tool.ValidateArgs(json.RawMessage(raw)); err != nil {
			t.Errorf("ValidateArgs(%s) = %v, want nil", raw, err)
		}
	}
}

func TestValidateArgsRejectsNamingTheProperty(t *testing.T) {
	tool := bookTool(t)
	long := strings.Repeat("x", 5000)
	cases := []struct {
		raw  string
		want []string
	}{
		{``, []string{"missing required property", "'name'", "'party_size'"}},
		{`null`, []string{"missing required property"}},
		{`{"party_size": 2}`, []string{"missing required property 'name'"}},
		{`{"party_size": "two", "name": "Ada"}`, []string{"property 'party_size' must be an integer, not a string"}},
		{`{"party_size": 2.5, "name": "Ada"}`, []string{"property 'party_size' must be an integer, not a number"}},
		{`{"party_size": 13, "name": "Ada"}`, []string{"property 'party_size' must be at most 12"}},
		{`{"party_size": 0, "name": "Ada"}`, []string{"property 'party_size' must be at least 1"}},
		{`{"party_size": 2, "name": ""}`, []string{"property 'name' must be at least 1 characters long (got 0)"}},
		{`{"party_size": 2, "name": "` + long + `"}`, []string{"property 'name' must be at most 40 characters long (got 5000)"}},
		{`{"party_size": 2, "name": "Ada", "time": "` + long + `"}`, []string{"property 'time' must match the pattern ^[0-2][0-9]:[0-5][0-9]$"}},
		{`{"party_size": 2, "name": "Ada", "seating": "roof"}`, []string{`property 'seating' must be one of "inside", "terrace"`}},
		{`{"party_size": 2, "name": "Ada", "options": {"high_chair": "yes"}}`, []string{"property 'options.high_chair' must be a boolean, not a string"}},
		{`{"party_size": 2, "name": "Ada", "options": {"crib": true}}`, []string{"property 'options': unknown property 'crib'"}},
		{`{"party_size": 2, "name": "Ada", "tags": ["a", "b", "c", "d"]}`, []string{"property 'tags' must have at most 3 items"}},
		{`{"party_size": 2, "name": "Ada", "tags": [1]}`, []string{"property 'tags.0' must be a string, not a number"}},
		{`{"party_size": 2, "name": "Ada", "notes": 5}`, []string{"property 'notes' must be null or a string, not a number"}},
		{`{"party_size": 2, "name": "Ada", "size": 3}`, []string{"unknown property 'size' (allowed: name, notes, options, party_size, seating, tags, time)"}},
		{`{"party_size": 2, "name": "Ada", "` + long + `": 1}`, []string{"unknown property 'xxxx", "…'"}},
		{`[1, 2]`, []string{"arguments must be a JSON object, not an array"}},
		{`"hello"`, []string{"arguments must be a JSON object, not a string"}},
		{`{"party_size": 2,`, []string{"not valid JSON"}},
		{`{"party_size": 2, "name": "Ada"} {}`, []string{"not valid JSON"}},
	}
	for _, c := range cases {
		name := c.raw
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			err := tool.ValidateArgs(json.RawMessage(c.raw))
			if err == nil {
				t.Fatal("accepted, want an error")
			}
			var ae *tools.ArgsError
			if !errors.As(err, &ae) || ae.Tool != "book_table" {
				t.Fatalf("error %T %v, want *tools.ArgsError for book_table", err, err)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, strings.Repeat("x", 100)) || len(msg) > 600 {
				t.Errorf("message echoes a long value (%d bytes): %.200q", len(msg), msg)
			}
		})
	}
}

func TestValidateArgsListsEveryProblemSorted(t *testing.T) {
	tool := bookTool(t)
	err := tool.ValidateArgs(json.RawMessage(`{"party_size": 99, "name": "", "seating": "roof"}`))
	var ae *tools.ArgsError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v", err)
	}
	if len(ae.Problems) != 3 {
		t.Fatalf("problems = %q, want 3", ae.Problems)
	}
	for i := 1; i < len(ae.Problems); i++ {
		if ae.Problems[i-1] > ae.Problems[i] {
			t.Errorf("problems not sorted: %q", ae.Problems)
		}
	}
}

func FuzzValidateArgs(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `1`, `{"party_size": 2, "name": "Ada"}`,
		`{"party_size": 1e400, "name": "Ada"}`, `{"party_size": -0, "name": "\u0000"}`,
		`{"options": {"high_chair": null}, "tags": [[], {}], "time": "25:61"}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}`, `{"name": "\xff\xfe"}`, `{"party_size": 2, "party_size": "x"}`,
	} {
		f.Add([]byte(seed))
	}
	tool := bookTool(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		err1 := tool.ValidateArgs(raw)
		err2 := tool.ValidateArgs(raw)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("not deterministic: %v vs %v", err1, err2)
		}
		if err1 == nil {
			return
		}
		var ae *tools.ArgsError
		if !errors.As(err1, &ae) {
			t.Fatalf("error %T is not an *ArgsError", err1)
		}
		if len(ae.Problems) == 0 || len(ae.Problems) > 6 || len(err1.Error()) > 1500 {
			t.Fatalf("unbounded message (%d problems, %d bytes)", len(ae.Problems), len(err1.Error()))
		}
	})
}
