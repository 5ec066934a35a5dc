// Package intents defines the intents tools return (what should happen to
// the session), their validation, and how each is applied: Apply hands each
// intent to the Target the session's current mode implements (its text side
// or its voice side), which says whether the intent applies there.
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
	// HandOff hands the conversation to a person (request_human): the
	// model's part ends; Reason and Message (the model's summary) go to the
	// browser, the event stream and the help desk.
	HandOff Type = "HAND_OFF"
)

// Types lists every intent type.
var Types = []Type{EndVoiceSession, SuppressAudio, SuppressTranscript, SetPendingMessage, StartVoiceSession, BlockUser,
	HandOff}

// Intent is one request from a tool to change the session. Only the fields
// that its Type uses are set.
type Intent struct {
	Type     Type          `json:"type"`
	Message  string        `json:"message,omitempty"`  // SET_PENDING_MESSAGE; HAND_OFF's summary
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
	case HandOff:
		if i.Reason == "" {
			return fmt.Errorf("intent %s: empty reason", i.Type)
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

// Target is what intents act on: a session in its current mode. Each method
// reports whether the intent applies in that mode (a text turn has no audio
// to suppress, a voice session is already in voice).
type Target interface {
	BlockUser(d time.Duration, reason string) bool
	SetPendingMessage(msg string) bool
	StartVoiceSession() bool
	EndVoiceSession() bool
	SuppressAudio() bool
	SuppressTranscript() bool
	// HandOff ends the model's part of the conversation (in voice, after
	// the current answer has been spoken).
	HandOff(reason, summary string) bool
}

// Apply applies intents to t in order and reports each, with whether it
// applied, to report (for logs and metrics).
func Apply(ins []Intent, t Target, report func(in Intent, applied bool)) {
	for _, in := range ins {
		var ok bool
		switch in.Type {
		case BlockUser:
			ok = t.BlockUser(in.Duration, in.Reason)
		case SetPendingMessage:
			ok = t.SetPendingMessage(in.Message)
		case StartVoiceSession:
			ok = t.StartVoiceSession()
		case EndVoiceSession:
			ok = t.EndVoiceSession()
		case SuppressAudio:
			ok = t.SuppressAudio()
		case SuppressTranscript:
			ok = t.SuppressTranscript()
		case HandOff:
			ok = t.HandOff(in.Reason, in.Message)
		}
		if report != nil {
			report(in, ok)
		}
	}
}
