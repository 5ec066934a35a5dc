package tools_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func builtinRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	// The renderings do not call handlers, so no knowledge base is needed.
	reg, err := tools.Load(builtin.FS, builtin.Handlers(nil))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestGeminiRenderingsMatchGolden(t *testing.T) {
	reg := builtinRegistry(t)
	var jsonSchemaDecls, schemaDecls []*genai.FunctionDeclaration
	for _, tool := range reg.Tools() {
		jsonSchemaDecls = append(jsonSchemaDecls, tool.GeminiDeclaration())
		s, err := tools.GeminiSchema(tool.ParametersSchema())
		if err != nil {
			t.Fatalf("%s: GeminiSchema: %v", tool.Name, err)
		}
		schemaDecls = append(schemaDecls, &genai.FunctionDeclaration{Name: tool.Name, Description: tool.Description, Parameters: s})
	}
	checkGolden(t, "gemini_parameters_json_schema.golden.json", jsonSchemaDecls)
	checkGolden(t, "gemini_schema.golden.json", schemaDecls)
}

func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tools -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering; if the change is intended run with -update.\ngot:\n%s", path, got)
	}
}

func TestGeminiDeclarationDropsSchemaKeyAndIsACopy(t *testing.T) {
	reg := builtinRegistry(t)
	tool, _ := reg.Lookup("kb_search")
	d := tool.GeminiDeclaration()
	params := d.ParametersJsonSchema.(map[string]any)
	if _, ok := params["$schema"]; ok {
		t.Error("parametersJsonSchema still has $schema")
	}
	if d.Name != "kb_search" || !strings.HasPrefix(d.Description, "Search the company knowledge base") {
		t.Errorf("declaration = %s / %q", d.Name, d.Description)
	}
	params["type"] = "array"
	if again := tool.GeminiDeclaration().ParametersJsonSchema.(map[string]any); again["type"] != "object" {
		t.Error("changing one declaration changed the next")
	}
}

func TestGeminiSchemaConverts(t *testing.T) {
	in := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"note":  map[string]any{"type": []any{"string", "null"}, "description": "d", "maxLength": 10.0, "format": "date-time"},
			"kind":  map[string]any{"type": "string", "enum": []any{"a", "b"}},
			"fixed": map[string]any{"type": "string", "const": "x"},
			"n":     map[string]any{"type": "number", "minimum": json.Number("0.5"), "maximum": 2},
			"list":  map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "minItems": 1.0},
			"any":   map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "boolean"}}},
		},
		"required":             []any{"kind"},
		"additionalProperties": false,
	}
	s, err := tools.GeminiSchema(in)
	if err != nil {
		t.Fatal(err)
	}
	note := s.Properties["note"]
	switch {
	case s.Type != genai.TypeObject || len(s.Required) != 1 || s.Required[0] != "kind":
		t.Errorf("object: %+v", s)
	case note.Type != genai.TypeString || note.Nullable == nil || !*note.Nullable || *note.MaxLength != 10 || note.Format != "date-time":
		t.Errorf("note: %+v", note)
	case strings.Join(s.Properties["kind"].Enum, ",") != "a,b" || strings.Join(s.Properties["fixed"].Enum, ",") != "x":
		t.Errorf("enums: %+v %+v", s.Properties["kind"], s.Properties["fixed"])
	case *s.Properties["n"].Minimum != 0.5 || *s.Properties["n"].Maximum != 2:
		t.Errorf("n: %+v", s.Properties["n"])
	case s.Properties["list"].Items.Type != genai.TypeInteger || *s.Properties["list"].MinItems != 1:
		t.Errorf("list: %+v", s.Properties["list"])
	case len(s.Properties["any"].AnyOf) != 2 || s.Properties["any"].AnyOf[1].Type != genai.TypeBoolean:
		t.Errorf("any: %+v", s.Properties["any"])
	}
}

func TestGeminiSchemaRefusesWhatItCannotExpress(t *testing.T) {
	prop := func(p map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{"p": p}}
	}
	cases := map[string]struct {
		in   map[string]any
		want string
	}{
		"oneOf":              {prop(map[string]any{"oneOf": []any{map[string]any{"type": "string"}}}), `/properties/p: "oneOf"`},
		"$ref":               {prop(map[string]any{"$ref": "#/$defs/x"}), `"$ref"`},
		"two types":          {prop(map[string]any{"type": []any{"string", "integer"}}), `"type"`},
		"integer enum":       {prop(map[string]any{"type": "integer", "enum": []any{1, 2}}), `"enum"`},
		"exclusiveMinimum":   {prop(map[string]any{"type": "number", "exclusiveMinimum": 0}), `"exclusiveMinimum"`},
		"open map":           {map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}, `"additionalProperties"`},
		"no type":            {prop(map[string]any{"description": "x"}), `needs a "type"`},
		"boolean schema":     {prop(nil), "must be an object"},
		"tuple items":        {prop(map[string]any{"type": "array", "items": []any{map[string]any{"type": "string"}}}), "/properties/p/items"},
		"fractional min len": {prop(map[string]any{"type": "string", "minLength": 1.5}), `"minLength"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "boolean schema" {
				c.in["properties"].(map[string]any)["p"] = true
			}
			_, err := tools.GeminiSchema(c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
