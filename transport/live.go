package transport

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LiveConfig opens a realtime (voice) upstream session.
type LiveConfig struct {
	System string
	Tools  []ToolDecl
	// History seeds a new session with the conversation so far (ignored
	// when resuming: a resumed session keeps its own context).
	History []Entry
	// ResumeHandle resumes an earlier upstream session; "" starts anew.
	ResumeHandle string
}

// LiveEventKind says what a LiveEvent carries.
type LiveEventKind int

const (
	LiveAudio              LiveEventKind = iota + 1 // Audio: PCM16LE mono 24 kHz
	LiveInputTranscript                             // Text: a piece of the user's speech
	LiveOutputTranscript                            // Text: a piece of the model's speech
	LiveText                                        // Text: model text (text modality)
	LiveInterrupted                                 // the user spoke over the model
	LiveGenerationComplete                          // the model finished generating
	LiveTurnComplete                                // the model's turn is over
	LiveToolCall                                    // Calls
	LiveToolCancel                                  // IDs: calls the model no longer wants
	LiveGoAway                                      // TimeLeft: the connection ends soon
	LiveResumption                                  // Handle, Resumable
)

// LiveEvent is one thing the realtime upstream said.
type LiveEvent struct {
	Kind      LiveEventKind
	Audio     []byte
	Text      string
	Calls     []FunctionCall
	IDs       []string
	TimeLeft  time.Duration
	Handle    string
	Resumable bool
}

// LiveSession is one realtime upstream connection. Sends are safe from any
// goroutine (the adapter serialises them through one writer) and never
// block for long: when the upstream cannot keep up they fail with
// ErrBackpressure. Events is closed when the connection ends; Err then
// says why (a *CloseError for a close frame, nil after Close).
type LiveSession interface {
	Events() <-chan LiveEvent
	Err() error
	SendAudio(pcm16k []byte) error
	SendAudioEnd() error
	SendText(text string) error
	// SendContext adds a user-role note to the conversation without asking
	// the model to answer (clientContent with turnComplete false).
	SendContext(text string) error
	SendToolResponses(results []FunctionResult) error
	// Flush waits until everything queued so far has been written.
	Flush(ctx context.Context) error
	Close() error
}

// LiveModel opens realtime sessions. Connect honours ctx and its own
// timeout even though the underlying SDK's dial does not.
type LiveModel interface {
	Connect(ctx context.Context, cfg LiveConfig) (LiveSession, error)
}

// ErrBackpressure means the upstream's send queue is full.
var ErrBackpressure = errors.New("upstream send queue full")

// CloseError is a close frame from the upstream.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string { return fmt.Sprintf("upstream closed: %d %s", e.Code, e.Reason) }
