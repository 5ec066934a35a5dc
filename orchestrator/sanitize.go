package orchestrator

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// sanitize strips control characters (protocol.StripControl) from every
// string of a handler's envelope that the model, the browser or the logs
// will see: the output's string values and object keys at any depth, the error message, the
// termination note, and the intents' message and reason. The handler's
// values are never modified: what changes is copied. A clean envelope of
// generic JSON values costs one pass over its strings and allocates
// nothing.
func sanitize(env tools.Envelope) tools.Envelope {
	env.Data, _ = sanitizeValue(env.Data)
	if env.Error != nil && protocol.HasControl(env.Error.Message) {
		e := *env.Error
		e.Message = protocol.StripControl(e.Message)
		env.Error = &e
	}
	if env.Terminate != nil && protocol.HasControl(env.Terminate.Note) {
		env.Terminate = &tools.Termination{Note: protocol.StripControl(env.Terminate.Note)}
	}
	copied := false
	for i, in := range env.Intents {
		if !protocol.HasControl(in.Message) && !protocol.HasControl(in.Reason) {
			continue
		}
		if !copied {
			env.Intents, copied = slices.Clone(env.Intents), true
		}
		env.Intents[i].Message = protocol.StripControl(in.Message)
		env.Intents[i].Reason = protocol.StripControl(in.Reason)
	}
	return env
}

// sanitizeValue returns v with control characters stripped from every
// string value and object key in it, and whether anything changed. Generic JSON values
// (what decoders produce, and the maps and slices handlers build) are
// walked, and copied only where they change; any other Go value (a struct,
// a typed slice) is checked through its JSON encoding and, only when that
// holds a control character, replaced by its sanitized generic JSON form.
func sanitizeValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		return v, false
	case string:
		if !protocol.HasControl(x) {
			return v, false
		}
		return protocol.StripControl(x), true
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			s, changed := sanitizeValue(e)
			if protocol.HasControl(k) {
				if out == nil {
					out = maps.Clone(x)
				}
				delete(out, k)
				// A key that was clean already keeps its value over one
				// that only becomes it.
				if clean := protocol.StripControl(k); !hasKey(x, clean) {
					out[clean] = s
				}
				continue
			}
			if changed {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = s
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range x {
			if s, changed := sanitizeValue(e); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = s
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []map[string]any:
		var out []map[string]any
		for i, e := range x {
			if s, changed := sanitizeValue(e); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = s.(map[string]any)
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []string:
		var out []string
		for i, e := range x {
			if protocol.HasControl(e) {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = protocol.StripControl(e)
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return sanitizeEncoded(v)
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// sanitizeEncoded handles a value sanitizeValue does not walk, through its
// JSON encoding, which shows every string it holds (C0 controls escaped as
// \u00XX, \b or \f; DEL and C1 raw). A value that cannot be encoded is left
// to the shaping step, which explains it.
func sanitizeEncoded(v any) (any, bool) {
	raw, err := json.Marshal(v)
	if err != nil || !encodedControl(raw) {
		return v, false
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return v, false
	}
	s, _ := sanitizeValue(generic)
	return s, true
}

// encodedControl reports whether JSON text, as json.Marshal writes it, may
// hold a string with a control character: C0 controls are escaped as
// \u0000–\u001f, \b or \f, DEL and C1 controls are written raw. An escaped
// backslash before such letters makes it say yes wrongly, which only costs
// a decode.
func encodedControl(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u000`)) || bytes.Contains(raw, []byte(`\u001`)) ||
		bytes.Contains(raw, []byte(`\b`)) || bytes.Contains(raw, []byte(`\f`)) {
		return true
	}
	for i, c := range raw {
		if c == 0x7f || c == 0xc2 && i+1 < len(raw) && raw[i+1] >= 0x80 && raw[i+1] <= 0x9f {
			return true
		}
	}
	return false
}
