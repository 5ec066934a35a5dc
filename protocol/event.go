package protocol

import "encoding/json"

// Event is a message the gateway sends the browser. Its type tag is its Go
// type's (EventType), not a field to fill in, so that no event can leave
// without one; Encode writes it first, where the protocol has always had
// it.
type Event interface {
	EventType() string
}

// The type tag of each server event.
func (SessionReady) EventType() string     { return TypeSessionReady }
func (TurnStart) EventType() string        { return TypeTurnStart }
func (TextDelta) EventType() string        { return TypeTextDelta }
func (TextDone) EventType() string         { return TypeTextDone }
func (TranscriptInput) EventType() string  { return TypeTranscriptIn }
func (TranscriptOutput) EventType() string { return TypeTranscriptOut }
func (Interrupted) EventType() string      { return TypeAudioInterrupted }
func (ToolCall) EventType() string         { return TypeToolCall }
func (ToolCallStarted) EventType() string  { return TypeToolCall }
func (ToolArgs) EventType() string         { return TypeToolArgs }
func (ToolResult) EventType() string       { return TypeToolResult }
func (ConfirmRequest) EventType() string   { return TypeConfirmReq }
func (ConfirmDone) EventType() string      { return TypeConfirmDone }
func (ModeChange) EventType() string       { return TypeMode }
func (TurnDone) EventType() string         { return TypeTurnDone }
func (Blocked) EventType() string          { return TypeBlocked }
func (Error) EventType() string            { return TypeError }
func (Pong) EventType() string             { return TypePong }
func (AuthOK) EventType() string           { return TypeAuthOK }
func (History) EventType() string          { return TypeHistoryPage }
func (Handoff) EventType() string          { return TypeHandoff }
func (HandoffPending) EventType() string   { return TypeHandoffPending }
func (HandoffEnded) EventType() string     { return TypeHandoffEnded }

// Encode marshals a server event: {"type":…} then the event's fields in
// their declared order. The event types cannot fail to marshal except
// through tool arguments, which are JSON-decoded maps.
func Encode(ev Event) ([]byte, error) {
	if m, ok := ev.(json.Marshaler); ok {
		return m.MarshalJSON() // it writes its own tag (an event nested in another)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return withType(ev.EventType(), body), nil
}

// MarshalJSON writes a confirm.request with its type tag wherever it is,
// in session.ready's pendingConfirmations as well as on its own.
func (r ConfirmRequest) MarshalJSON() ([]byte, error) {
	type fields ConfirmRequest // without this method
	body, err := json.Marshal(fields(r))
	if err != nil {
		return nil, err
	}
	return withType(TypeConfirmReq, body), nil
}

// withType is body, a JSON object, with "type":typ as its first member;
// typ is one of the Type constants, which need no escaping.
func withType(typ string, body []byte) []byte {
	out := make([]byte, 0, len(body)+len(typ)+10)
	out = append(out, `{"type":"`...)
	out = append(out, typ...)
	out = append(out, '"')
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...)
}
