package tools

import (
	"encoding/json"
	"slices"
)

// Redacted replaces every value that is not on a tool's allow-list.
const Redacted = "[redacted]"

// RedactArgs returns a copy of args in which only the keys on the tool's
// args allow-list keep their values; every other key stays, with the value
// Redacted, so readers can see that it was sent. Kept values are shared,
// not copied. A nil map gives nil.
func (t *Tool) RedactArgs(args map[string]any) map[string]any {
	return redactObject(args, t.Redact.Args)
}

// RedactResult does the same as RedactArgs for the top-level keys of a
// result with the result allow-list. A result that is not a JSON object
// (after a JSON round trip for structs) has no keys to allow and is replaced
// by Redacted as a whole; nil stays nil.
func (t *Tool) RedactResult(data any) any {
	if data == nil {
		return nil
	}
	obj, ok := data.(map[string]any)
	if !ok {
		b, err := json.Marshal(data)
		if err != nil {
			return Redacted
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return Redacted
		}
		if obj, ok = generic.(map[string]any); !ok {
			return Redacted
		}
	}
	return redactObject(obj, t.Redact.Result)
}

func redactObject(obj map[string]any, allow []string) map[string]any {
	if obj == nil {
		return nil
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if slices.Contains(allow, k) {
			out[k] = v
		} else {
			out[k] = Redacted
		}
	}
	return out
}
