// Package timeline is the record of one session for people: its turns
// (input, answer, every tool call with its outcome, confirmations) and its
// events (mode switches, operator actions, the close), in the JSON format
// that the admin listener serves, the store keeps under the session's key
// and the event stream carries. Everything in it went through the tools'
// redaction allow-lists first; users appear as a keyed pseudonym beside
// their ID only where an operator reads them.
package timeline

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Kinds of timeline entries.
const (
	KindTurn  = "turn"
	KindEvent = "event"
)

// Events besides turns.
const (
	EventMode         = "mode"         // the session changed mode
	EventConfirmation = "confirmation" // the user answered a confirm.request
	EventClose        = "close"        // a connection of the session ended
	EventOperator     = "operator"     // an operator acted on the session
	EventHandoff      = "handoff"      // the model handed the conversation to a person
	EventHandoffText  = "handoff.text" // the user wrote while it was handed off (Text)
	EventHandback     = "handback"     // an operator handed it back to the model (By)
	EventGreeting     = "greeting"     // the profile's greeting was shown at the session's start (Text)
)

// Bounds of one entry, so that a session's timeline stays within
// MaxEntries × about 40 KiB whatever the model or the user say.
const (
	// MaxText bounds the input and the answer of a turn, in bytes.
	MaxText = 4000
	// MaxCalls bounds the calls one turn lists (the count is kept).
	MaxCalls = 32
	// MaxFieldBytes bounds an allow-listed argument or result value kept
	// as a string.
	MaxFieldBytes = 256
	// MaxConfirmations bounds the confirmations one turn lists.
	MaxConfirmations = 8
)

// DefaultMaxEntries is how many entries a session's timeline keeps by
// default: the newest; older ones are dropped first.
const DefaultMaxEntries = 200

// Turn is one finished turn.
type Turn struct {
	Kind    string `json:"kind"` // KindTurn
	Session string `json:"session"`
	// User is the pseudonym of the session's user (internal/pseudonym).
	User      string    `json:"user"`
	Node      string    `json:"node,omitempty"`
	Turn      int       `json:"turn"`
	Mode      string    `json:"mode"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	EndReason string    `json:"endReason"`
	// Input is what the user typed or said (the input transcript), or the
	// gateway's note for a turn it started (InputKind "confirmation").
	Input     string `json:"input,omitempty"`
	InputKind string `json:"inputKind,omitempty"`
	Answer    string `json:"answer,omitempty"`
	Calls     []Call `json:"calls,omitempty"`
	// CallCount is every call of the turn; Calls lists at most MaxCalls.
	CallCount     int            `json:"callCount"`
	Confirmations []Confirmation `json:"confirmations,omitempty"`
	// VoiceResponseMs is the voice-to-voice latency of a voice turn: from
	// the end of the user's speech to the first audio of the answer sent
	// to the browser; absent when the turn had none.
	VoiceResponseMs *int64 `json:"voiceResponseMs,omitempty"`
	Truncated       bool   `json:"truncated,omitempty"`
}

// Call is one tool call the model made, refused ones included.
type Call struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Outcome is "ok", "error" (the tool ran and failed) or "refused" (the
	// gateway answered without running it); "" while it runs.
	Outcome    string `json:"outcome"`
	ErrorType  string `json:"errorType,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// Args and Result are only the fields on the tool's allow-lists.
	Args   map[string]any `json:"args,omitempty"`
	Result map[string]any `json:"result,omitempty"`
}

// Outcomes of a call.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeRefused = "refused"
)

// Confirmation is a confirm.request a call raised in a turn; its answer
// comes later, as an EventConfirmation.
type Confirmation struct {
	Tool      string    `json:"tool"`
	Outcome   string    `json:"outcome"` // "asked"
	ExpiresAt time.Time `json:"expiresAt"`
}

// Event is something that happened to the session outside a turn's calls.
type Event struct {
	Kind    string    `json:"kind"` // KindEvent
	Event   string    `json:"event"`
	Session string    `json:"session"`
	At      time.Time `json:"at"`
	// Turn is the session's turn when it happened (0 before the first).
	Turn int    `json:"turn"`
	Node string `json:"node,omitempty"`
	// Mode and Reason: the new mode and why (EventMode), the close reason
	// (EventClose, with Code), the outcome and tool (EventConfirmation),
	// the action (EventOperator, with By).
	Mode    string `json:"mode,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Code    int    `json:"code,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	By      string `json:"by,omitempty"`
	// Summary is the model's summary for the person (EventHandoff); Text
	// what the user wrote (EventHandoffText) or the greeting the browser
	// was shown (EventGreeting), at most MaxText bytes.
	Summary string `json:"summary,omitempty"`
	Text    string `json:"text,omitempty"`
}

// Session is the head of a session's timeline, as the admin listener
// shows it.
type Session struct {
	ID      string    `json:"id"`
	UserID  string    `json:"userId"`
	User    string    `json:"user"` // the pseudonym
	Created time.Time `json:"created"`
	Mode    string    `json:"mode"`
	Turns   int       `json:"turns"`
	// Node holds the session now; "" when no connection of it is live.
	Node   string `json:"node,omitempty"`
	Closed string `json:"closed,omitempty"` // who closed it, when an operator did
	// Context is the page context session.start carried (untrusted, as the
	// browser sent it); Profile, Voice and LanguageCode what the session
	// runs with when it asked (docs/profiles.md).
	Context      json.RawMessage `json:"context,omitempty"`
	Profile      string          `json:"profile,omitempty"`
	Voice        string          `json:"voice,omitempty"`
	LanguageCode string          `json:"languageCode,omitempty"`
	// HandedOff is the reason of the hand-off to a person while the model
	// does not have the conversation (request_human).
	HandedOff string `json:"handedOff,omitempty"`
}

// View is a whole timeline: the session and its entries, oldest first.
type View struct {
	Session Session `json:"session"`
	Turns   []Turn  `json:"turns"`
	Events  []Event `json:"events"`
	// Dropped is true when older entries were dropped to keep the
	// timeline within its bound.
	Dropped bool `json:"dropped,omitempty"`
}

// Clip cuts s to at most n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…", true
}

// clipFields bounds each value of an allow-listed map: strings to
// MaxFieldBytes, anything that is not a string, number or bool to its
// kind only (the allow-list names the field, not its whole content).
func clipFields(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k], _ = Clip(x, MaxFieldBytes)
		case bool, float64, float32, int, int64, int32, nil:
			out[k] = x
		case []any:
			out[k] = map[string]any{"items": len(x)}
		case map[string]any:
			out[k] = map[string]any{"fields": len(x)}
		default:
			out[k] = "…"
		}
	}
	return out
}
