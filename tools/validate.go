package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxProblems bounds how many problems one ArgsError lists.
const maxProblems = 5

// ArgsError says why a tool's arguments were refused, in words a model can
// act on. It names the failing properties and never echoes argument values.
type ArgsError struct {
	Tool     string
	Problems []string // sorted, at most maxProblems (+ a "more" note)
}

func (e *ArgsError) Error() string {
	return fmt.Sprintf("invalid arguments for %s: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// ValidateArgs checks raw arguments against the tool's JSON Schema. Empty
// input and JSON null count as {} (providers send either for a call without
// arguments). The error, if any, is an *ArgsError.
func (t *Tool) ValidateArgs(raw json.RawMessage) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return &ArgsError{Tool: t.Name, Problems: []string{"arguments are not valid JSON; send a JSON object"}}
	}
	if _, ok := doc.(map[string]any); !ok {
		return &ArgsError{Tool: t.Name, Problems: []string{"arguments must be a JSON object, not " + jsonKind(doc)}}
	}
	err = t.args.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgsError{Tool: t.Name, Problems: []string{"arguments could not be validated"}}
	}
	seen := make(map[string]bool)
	var problems []string
	for _, leaf := range leafCauses(ve) {
		p := t.describe(leaf)
		if !seen[p] {
			seen[p] = true
			problems = append(problems, p)
		}
	}
	sort.Strings(problems)
	if len(problems) > maxProblems {
		more := len(problems) - maxProblems
		problems = append(problems[:maxProblems], fmt.Sprintf("and %d more", more))
	}
	return &ArgsError{Tool: t.Name, Problems: problems}
}

// describe renders one leaf validation error. Values come only from the
// schema (limits, patterns, enum members), never from the arguments.
func (t *Tool) describe(ve *jsonschema.ValidationError) string {
	subject := "arguments"
	if len(ve.InstanceLocation) > 0 {
		subject = "property " + quoteName(strings.Join(ve.InstanceLocation, "."))
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		names := quoteNames(k.Missing)
		if len(ve.InstanceLocation) == 0 {
			return "missing required property " + names
		}
		return subject + ": missing required property " + names
	case *kind.AdditionalProperties:
		msg := "unknown property " + quoteNames(k.Properties)
		if len(ve.InstanceLocation) == 0 {
			if len(t.properties) == 0 {
				return msg + " (this tool takes no arguments)"
			}
			return msg + " (allowed: " + strings.Join(t.properties, ", ") + ")"
		}
		return subject + ": " + msg
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = typeName(w)
		}
		return fmt.Sprintf("%s must be %s, not %s", subject, strings.Join(want, " or "), typeName(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("%s must be at least %d characters long (got %d)", subject, k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("%s must be at most %d characters long (got %d)", subject, k.Want, k.Got)
	case *kind.Minimum:
		return fmt.Sprintf("%s must be at least %s", subject, ratString(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("%s must be at most %s", subject, ratString(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be greater than %s", subject, ratString(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s", subject, ratString(k.Want))
	case *kind.MultipleOf:
		return fmt.Sprintf("%s must be a multiple of %s", subject, ratString(k.Want))
	case *kind.MinItems:
		return fmt.Sprintf("%s must have at least %d items", subject, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("%s must have at most %d items", subject, k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("%s must have at least %d properties", subject, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("%s must have at most %d properties", subject, k.Want)
	case *kind.UniqueItems:
		return subject + " must not contain duplicate items"
	case *kind.Pattern:
		return fmt.Sprintf("%s must match the pattern %s", subject, Clip(k.Want, 120))
	case *kind.Format:
		return fmt.Sprintf("%s must be a valid %s", subject, k.Want)
	case *kind.Enum:
		return fmt.Sprintf("%s must be one of %s", subject, Clip(joinValues(k.Want), 200))
	case *kind.Const:
		return fmt.Sprintf("%s must be %s", subject, Clip(joinValues([]any{k.Want}), 200))
	case *kind.FalseSchema:
		return subject + " is not allowed"
	default:
		// The remaining kinds (combinators, conditionals) carry no values
		// from the instance in their keyword path.
		return fmt.Sprintf("%s does not satisfy the schema keyword %q", subject, strings.Join(ve.ErrorKind.KeywordPath(), "/"))
	}
}

// quoteName quotes a property name, shortened so that a model that invents
// a very long key does not get it echoed back whole.
func quoteName(s string) string {
	return "'" + Clip(s, 64) + "'"
}

func quoteNames(names []string) string {
	names = append([]string(nil), names...)
	sort.Strings(names)
	q := make([]string, 0, len(names))
	for i, n := range names {
		if i == 3 {
			q = append(q, fmt.Sprintf("and %d more", len(names)-i))
			break
		}
		q = append(q, quoteName(n))
	}
	return strings.Join(q, ", ")
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}

func joinValues(vs []any) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		switch v := v.(type) {
		case string:
			parts = append(parts, fmt.Sprintf("%q", v))
		case nil:
			parts = append(parts, "null")
		case map[string]any, []any:
			parts = append(parts, jsonKind(v))
		default:
			parts = append(parts, fmt.Sprint(v))
		}
	}
	return strings.Join(parts, ", ")
}

// typeName puts an article before a JSON Schema type name.
func typeName(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "array", "object":
		return "an " + t
	default:
		return "a " + t
	}
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return "a number"
	}
}
