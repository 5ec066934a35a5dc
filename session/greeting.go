package session

import (
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/timeline"
	"github.com/turnstile-gw/turnstile/transport"
)

// A profile's greeting (docs/profiles.md) is what the assistant says first
// in a new session: the browser gets it as text.done of turn 0, right
// after session.ready, and the history keeps it as the model's entry of
// turn 0 (kind "greeting"), so that a resume shows it and the model knows
// it greeted. Models do not get it as a history entry, though: Gemini
// refuses a conversation that opens with the model, which is why a
// history otherwise always starts at a user entry. The greeting goes into
// the session's instruction instead, for as long as the history holds it.
// In voice it is shown, not spoken: the Live model is told it greeted. The
// operator's timeline has it as a greeting event (with its text), written
// with the greeting's history entry.

// kindGreeting marks the greeting's history entry.
const kindGreeting = "greeting"

// greetingHeading starts the greeting's block of the instruction; tests
// and docs/profiles.md quote it.
const greetingHeading = "# Your greeting"

// isGreeting reports whether e is a greeting entry.
func isGreeting(e transport.Entry) bool {
	return e.Kind == kindGreeting && e.Role == transport.RoleModel
}

// greet says a new session's greeting, if its profile has one.
func (s *session) greet() {
	p := s.asks.profile
	if p == nil || p.Greeting == "" {
		return
	}
	clipped, _ := timeline.Clip(p.Greeting, timeline.MaxText)
	s.event(timeline.Event{Event: timeline.EventGreeting, Text: clipped})
	s.keep(transport.Entry{Role: transport.RoleModel, Text: p.Greeting, Kind: kindGreeting})
	s.send(protocol.TextDone{Turn: 0, Text: p.Greeting})
}

// splitGreeting takes the greeting off the head of a model request's
// history: "" and h when there is none.
func splitGreeting(h []transport.Entry) (string, []transport.Entry) {
	if len(h) > 0 && isGreeting(h[0]) {
		return h[0].Text, h[1:]
	}
	return "", h
}
