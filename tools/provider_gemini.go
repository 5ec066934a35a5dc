package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"google.golang.org/genai"
)

// ParametersSchema returns a fresh copy of the tool's argument JSON Schema
// as generic JSON values (numbers as float64), without the "$schema" key
// that providers do not accept. The caller may modify it.
func (t *Tool) ParametersSchema() map[string]any {
	var m map[string]any
	if err := json.Unmarshal(t.Parameters, &m); err != nil || m == nil {
		// Unreachable for a loaded tool: Load validated the JSON.
		return map[string]any{"type": "object"}
	}
	delete(m, "$schema")
	return m
}

// GeminiDeclaration renders the tool for Gemini with its canonical JSON
// Schema in parametersJsonSchema, which Gemini accepts as is.
func (t *Tool) GeminiDeclaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name:                 t.Name,
		Description:          t.Description,
		ParametersJsonSchema: t.ParametersSchema(),
	}
}

// GeminiSchema converts the subset of JSON Schema that Gemini's OpenAPI
// style Schema can express (type with UPPERCASE names, nullable from
// ["x","null"], properties, required, items, enum and string const,
// description, title, default, format, pattern, length, item, property and
// numeric bounds, anyOf) and returns an error naming the location of the
// first construct it cannot express ($ref, oneOf, allOf, not, tuples,
// exclusive bounds, non-string enums, open additionalProperties, …).
// "additionalProperties": false is accepted and dropped: Gemini only ever
// produces declared properties.
func GeminiSchema(jsonSchema map[string]any) (*genai.Schema, error) {
	s, err := geminiSchema(jsonSchema, "")
	if err != nil {
		return nil, fmt.Errorf("gemini schema: %w", err)
	}
	return s, nil
}

func geminiSchema(node any, at string) (*genai.Schema, error) {
	where := at
	if where == "" {
		where = "/"
	}
	obj, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("at %s: a schema must be an object", where)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	s := &genai.Schema{}
	for _, k := range keys {
		v := obj[k]
		bad := func(why string) error { return fmt.Errorf("at %s: %q %s", where, k, why) }
		var err error
		switch k {
		case "$schema", "$comment", "$id":
			// Annotations with no Gemini counterpart and no effect on values.
		case "type":
			err = setGeminiType(s, v)
			if err != nil {
				err = bad(err.Error())
			}
		case "title", "description", "format", "pattern":
			str, ok := v.(string)
			if !ok {
				return nil, bad("must be a string")
			}
			switch k {
			case "title":
				s.Title = str
			case "description":
				s.Description = str
			case "format":
				s.Format = str
			case "pattern":
				s.Pattern = str
			}
		case "default":
			s.Default = v
		case "examples":
			ex, ok := v.([]any)
			if !ok {
				return nil, bad("must be an array")
			}
			if len(ex) > 0 {
				s.Example = ex[0]
			}
		case "nullable":
			b, ok := v.(bool)
			if !ok {
				return nil, bad("must be a boolean")
			}
			s.Nullable = &b
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, bad("must be an object")
			}
			s.Properties = make(map[string]*genai.Schema, len(props))
			names := make([]string, 0, len(props))
			for name := range props {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				sub, err := geminiSchema(props[name], at+"/properties/"+escapePointer(name))
				if err != nil {
					return nil, err
				}
				s.Properties[name] = sub
			}
		case "required", "propertyOrdering":
			list, err := stringList(v)
			if err != nil {
				return nil, bad(err.Error())
			}
			if k == "required" {
				s.Required = list
			} else {
				s.PropertyOrdering = list
			}
		case "items":
			sub, err := geminiSchema(v, at+"/items")
			if err != nil {
				return nil, err
			}
			s.Items = sub
		case "anyOf":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return nil, bad("must be a non-empty array")
			}
			for i, alt := range list {
				sub, err := geminiSchema(alt, fmt.Sprintf("%s/anyOf/%d", at, i))
				if err != nil {
					return nil, err
				}
				s.AnyOf = append(s.AnyOf, sub)
			}
		case "enum":
			list, err := stringList(v)
			if err != nil {
				return nil, bad("can only list strings in a Gemini schema")
			}
			s.Enum = list
		case "const":
			str, ok := v.(string)
			if !ok {
				return nil, bad("can only be a string in a Gemini schema")
			}
			s.Enum = []string{str}
		case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
			n, ok := wholeNumber(v)
			if !ok {
				return nil, bad("must be a non-negative integer")
			}
			switch k {
			case "minLength":
				s.MinLength = &n
			case "maxLength":
				s.MaxLength = &n
			case "minItems":
				s.MinItems = &n
			case "maxItems":
				s.MaxItems = &n
			case "minProperties":
				s.MinProperties = &n
			case "maxProperties":
				s.MaxProperties = &n
			}
		case "minimum", "maximum":
			f, ok := number(v)
			if !ok {
				return nil, bad("must be a number")
			}
			if k == "minimum" {
				s.Minimum = &f
			} else {
				s.Maximum = &f
			}
		case "additionalProperties":
			if b, ok := v.(bool); !ok || b {
				return nil, bad("can only be false in a Gemini schema")
			}
		default:
			return nil, bad("cannot be expressed in a Gemini schema")
		}
		if err != nil {
			return nil, err
		}
	}
	if s.Type == "" && len(s.AnyOf) == 0 {
		return nil, fmt.Errorf("at %s: a Gemini schema needs a \"type\"", where)
	}
	return s, nil
}

// setGeminiType maps "type" (a name, or [name, "null"]) to UPPERCASE.
func setGeminiType(s *genai.Schema, v any) error {
	var names []string
	switch t := v.(type) {
	case string:
		names = []string{t}
	case []any:
		list, err := stringList(t)
		if err != nil {
			return err
		}
		names = list
	default:
		return fmt.Errorf("must be a string or an array of strings")
	}
	var main []string
	nullable := false
	for _, n := range names {
		if n == "null" {
			nullable = true
		} else {
			main = append(main, n)
		}
	}
	switch {
	case len(main) == 0 && nullable:
		s.Type = genai.TypeNULL
		return nil
	case len(main) != 1:
		return fmt.Errorf("must name one type (optionally with \"null\"), got %s", strings.Join(names, ", "))
	}
	switch main[0] {
	case "string", "number", "integer", "boolean", "array", "object":
		s.Type = genai.Type(strings.ToUpper(main[0]))
	default:
		return fmt.Errorf("names an unknown type %q", main[0])
	}
	if nullable {
		s.Nullable = &nullable
	}
	return nil
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		if ss, ok := v.([]string); ok {
			return append([]string(nil), ss...), nil
		}
		return nil, fmt.Errorf("must be an array of strings")
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("must be an array of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// number accepts the numeric types JSON decoders produce.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	default:
		return 0, false
	}
}

func wholeNumber(v any) (int64, bool) {
	f, ok := number(v)
	if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt64/2 {
		return 0, false
	}
	return int64(f), true
}

func escapePointer(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
