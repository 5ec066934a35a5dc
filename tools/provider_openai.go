package tools

// OpenAIFunction renders the tool as an entry of the OpenAI Chat
// Completions "tools" list:
//
//	{"type": "function", "function": {"name", "description", "parameters", "strict": false}}
//
// parameters is the tool's JSON Schema without "$schema" (a fresh copy the
// caller may modify). strict is false because OpenAI's strict mode demands
// that every property be required, and tools have optional arguments; the
// gateway validates arguments against the full schema before any handler
// runs anyway.
func (t *Tool) OpenAIFunction() map[string]any {
	return map[string]any{
		"type": "function",
		"function": map[string]any{
			"name":        t.Name,
			"description": t.Description,
			"parameters":  t.ParametersSchema(),
			"strict":      false,
		},
	}
}
