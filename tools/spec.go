package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Spec is a tool defined in code rather than by a folder: the gateway
// builds one for each tool an MCP server lists.
type Spec struct {
	// Manifest holds the tool's metadata. Its Name must be safe for every
	// provider (ProviderSafeName); Parameters is the JSON Schema of the
	// arguments, whose top-level type must be "object" (draft 2020-12
	// unless its "$schema" names another draft; external references are
	// refused). Description is required; Guide defaults to it. HTTP must be
	// nil.
	Manifest
	Handler Handler
	// Origin names where the tool comes from in messages.
	Origin string
}

// providerSafeName is what OpenAI (^[a-zA-Z0-9_-]{1,64}$) and Gemini (a
// letter or underscore first, at most 64 characters) both accept.
var providerSafeName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)

// ProviderSafeName reports whether name can be declared to every provider
// as a function name: a letter or underscore, then letters, digits, '_' or
// '-', 64 characters at most.
func ProviderSafeName(name string) bool {
	return providerSafeName.MatchString(name)
}

// NewTool checks a Spec and builds its Tool. Every problem is reported at
// once, joined, each a *LoadError naming the tool.
func NewTool(s Spec) (*Tool, error) {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, &LoadError{Tool: s.Name, Err: fmt.Errorf(format, args...)})
	}
	m := s.Manifest
	if !ProviderSafeName(m.Name) {
		fail("name is not safe for every provider (a letter or _, then letters, digits, _ or -, at most 64)")
	}
	if !validCategory(m.Category) {
		fail("category %q: must be retrieval, action or utility", m.Category)
	}
	if len(m.Modes) == 0 {
		fail("modes: must list text and/or voice")
	}
	for i, mode := range m.Modes {
		if !mode.Valid() || slices.Index(m.Modes, mode) != i {
			fail("modes[%d]: %q is not a mode or is listed twice", i, mode)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"softLatencyMs", m.SoftLatencyMs.Text}, {"softLatencyMs.voice", m.SoftLatencyMs.Voice}, {"timeoutMs", m.TimeoutMs}} {
		if f.v != 0 && (f.v < minLatencyMs || f.v > maxLatencyMs) {
			fail("%s: must be between %d and %d", f.name, minLatencyMs, maxLatencyMs)
		}
	}
	if strings.TrimSpace(m.Description) == "" {
		fail("description is empty")
	}
	if m.HTTP != nil {
		fail("an HTTP tool is loaded from its folder (LoadWith), not built from a Spec")
	}
	if s.Handler == nil {
		fail("handler is nil")
	}
	args, props, err := compileParameters(m.Name, m.Parameters)
	if err != nil {
		fail("parameters: %v", err)
	}
	for _, k := range m.Redact.Args {
		if err == nil && !slices.Contains(props, k) {
			fail("redact.args lists %q, which is not a parameter", k)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if m.Guide == "" {
		m.Guide = m.Description
	}
	m.Modes = slices.Clone(m.Modes)
	m.Redact = Redact{Args: slices.Clone(m.Redact.Args), Result: slices.Clone(m.Redact.Result)}
	var compact bytes.Buffer
	_ = json.Compact(&compact, m.Parameters) // valid: it compiled
	m.Parameters = compact.Bytes()
	raw, err := json.Marshal(struct {
		Manifest
		Guide string `json:"guide,omitempty"` // hashed separately
	}{Manifest: m})
	if err != nil {
		return nil, &LoadError{Tool: m.Name, Err: err}
	}
	return &Tool{
		Manifest:   m,
		Handler:    s.Handler,
		args:       args,
		properties: props,
		rawSchema:  raw,
		rawGuide:   []byte(m.Guide),
		origin:     s.Origin,
	}, nil
}

// compileParameters compiles a tool's argument schema, which must be a JSON
// object whose top-level type is "object", and returns its top-level
// property names, sorted.
func compileParameters(name string, raw json.RawMessage) (*jsonschema.Schema, []string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, errors.New("missing")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("invalid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, errors.New("must be a JSON Schema object")
	}
	if obj["type"] != "object" {
		return nil, nil, errors.New(`the top-level "type" must be "object"`)
	}
	sch, err := compileSchema("tool://"+name+"/parameters.json", doc)
	if err != nil {
		return nil, nil, fmt.Errorf("not a valid JSON Schema: %w", metaError(err))
	}
	var props []string
	if p, ok := obj["properties"].(map[string]any); ok {
		for k := range p {
			props = append(props, k)
		}
		sort.Strings(props)
	}
	return sch, props, nil
}
