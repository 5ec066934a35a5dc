// Package intents defines the intents tools return (what should happen to
// the session), their validation, and how each is applied to a session
// through the small Target interface the session implements.
package intents

import (
	"fmt"
	"time"
)

// Type names an intent. The set is closed.
type Type string

const (
	EndVoiceSession    Type = "END_VOICE_SESSION"
	SuppressAudio      Type = "SUPPRESS_AUDIO"
	SuppressTranscript Type = "SUPPRESS_TRANSCRIPT"
	SetPendingMessage  Type = "SET_PENDING_MESSAGE"
	StartVoiceSession  Type = "START_VOICE_SESSION"
	BlockUser          Type = "BLOCK_USER"
)

// Intent is one request from a tool to change the session. Only the fields
// that its Type uses are set.
type Intent struct {
	Type     Type          `json:"type"`
	Message  string        `json:"message,omitempty"`  // SET_PENDING_MESSAGE
	Duration time.Duration `json:"duration,omitempty"` // BLOCK_USER
	Reason   string        `json:"reason,omitempty"`
}

// Validate reports whether the intent is well formed.
func (i Intent) Validate() error {
	switch i.Type {
	case EndVoiceSession, SuppressAudio, SuppressTranscript, StartVoiceSession:
		return nil
	case SetPendingMessage:
		if i.Message == "" {
			return fmt.Errorf("intent %s: empty message", i.Type)
		}
		return nil
	case BlockUser:
		if i.Duration <= 0 {
			return fmt.Errorf("intent %s: duration must be positive", i.Type)
		}
		return nil
	default:
		return fmt.Errorf("unknown intent type %q", i.Type)
	}
}
