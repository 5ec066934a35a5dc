package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// Per-mode defaults of the gateway's policy, defined once: the per-turn
// budgets and the soft latency budget of retrieval tools. An audio answer
// stalls audibly, so voice is stricter than text.
var (
	defaultBudgets = map[protocol.Mode]Budget{
		protocol.ModeText:  {MaxRetrieval: 5, MaxCalls: 10},
		protocol.ModeVoice: {MaxRetrieval: 2, MaxCalls: 3},
	}
	defaultSoftLatency = map[protocol.Mode]time.Duration{
		protocol.ModeText:  2 * time.Second,
		protocol.ModeVoice: 800 * time.Millisecond,
	}
)

// VoiceSoftLatency is the soft latency budget of every tool in voice whose
// category or manifest sets no tighter one: a spoken answer that waits
// longer than a second for a tool is a silence the user notices.
const VoiceSoftLatency = time.Second

// DefaultBudget is the per-turn gate of a mode when neither the settings
// nor the policy file set one.
func DefaultBudget(mode protocol.Mode) Budget { return defaultBudgets[mode] }

// DefaultSoftLatency is the soft latency budget of a retrieval tool in a
// mode when nothing more specific applies.
func DefaultSoftLatency(mode protocol.Mode) time.Duration { return defaultSoftLatency[mode] }

// LatencyMs is a manifest's softLatencyMs: one number for every mode, or an
// object with a value per mode ({"text": 2000, "voice": 600}); 0 means
// "not set". Explicit marks a value the operator's policy file set.
type LatencyMs struct {
	Text, Voice int
	Explicit    bool
}

// In returns the value for a mode, 0 when unset.
func (l LatencyMs) In(mode protocol.Mode) int {
	if mode == protocol.ModeVoice {
		return l.Voice
	}
	return l.Text
}

// IsZero reports whether no mode has a value (for omitzero).
func (l LatencyMs) IsZero() bool { return l.Text == 0 && l.Voice == 0 }

// UnmarshalJSON takes a number or a per-mode object.
func (l *LatencyMs) UnmarshalJSON(b []byte) error {
	if len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] == '{' {
		var m struct {
			Text  int `json:"text"`
			Voice int `json:"voice"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("softLatencyMs: %w", err)
		}
		*l = LatencyMs{Text: m.Text, Voice: m.Voice}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("softLatencyMs: want a number or {\"text\": n, \"voice\": n}: %w", err)
	}
	*l = LatencyMs{Text: n, Voice: n}
	return nil
}

// MarshalJSON writes the per-mode object.
func (l LatencyMs) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[protocol.Mode]int{protocol.ModeText: l.Text, protocol.ModeVoice: l.Voice})
}

// SoftLatencyIn is the latency above which a call in the given mode is
// reported as slow (it is never cut short); 0 means no soft budget. The
// policy file's value wins. Otherwise the mode's default applies: for
// retrieval tools DefaultSoftLatency, for every other tool
// VoiceSoftLatency in voice and none in text. A manifest's value applies
// as written, except that in voice it can only tighten the default, never
// loosen it: a tool author cannot silently make voice calls wait longer
// than the operator's default (raise it in the policy file).
func (t *Tool) SoftLatencyIn(mode protocol.Mode) time.Duration {
	def := time.Duration(0)
	switch {
	case t.Category == CategoryRetrieval:
		def = DefaultSoftLatency(mode)
	case mode == protocol.ModeVoice:
		def = VoiceSoftLatency
	}
	v := time.Duration(t.SoftLatencyMs.In(mode)) * time.Millisecond
	switch {
	case v > 0 && t.SoftLatencyMs.Explicit:
		return v
	case v > 0 && mode == protocol.ModeVoice && v > def:
		return def
	case v > 0:
		return v
	default:
		return def
	}
}

// softLatencyDoc is the effective soft budget per mode, for documents
// (registry build output, effective metadata).
func (t *Tool) softLatencyDoc() map[string]int64 {
	return map[string]int64{
		string(protocol.ModeText):  t.SoftLatencyIn(protocol.ModeText).Milliseconds(),
		string(protocol.ModeVoice): t.SoftLatencyIn(protocol.ModeVoice).Milliseconds(),
	}
}
