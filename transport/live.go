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
	// Voice is a prebuilt voice name ("" the adapter's default) and
	// LanguageCode a BCP-47 tag for speech ("" the model's own).
	Voice, LanguageCode string
	// Affinity is the session's key for an adapter that serves
	// connections from event loops: the loop it picks by it is the one
	// that serves the session's browser.
	Affinity uint64
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
	LiveTokens                                      // Usage: what a turn cost
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
	Usage     *LiveUsage
}

// LiveUsage is the token count the upstream reported for a turn (Gemini
// Live's usageMetadata). Input is the prompt; Output the response plus any
// thinking. The ByModality maps split them where the upstream did ("text",
// "audio", "image", "video", "document"; nil when it did not); they may
// cover less than the total.
type LiveUsage struct {
	Input, Output                     int
	InputByModality, OutputByModality map[string]int
}

// LiveSession is one realtime upstream connection. Exactly one goroutine
// calls Recv; any goroutine may send. Sends are direct, synchronous writes
// (serialised by the adapter) bounded by the adapter's write timeout; the
// adapter starts no goroutines of its own.
type LiveSession interface {
	// Recv blocks until the upstream says something and returns it. One
	// upstream message may carry several events; they come one per call, in
	// order. Slices in the event (Audio) are valid only until the next Recv
	// call. When the connection has ended Recv returns why: a *CloseError
	// for a close frame (1006 when the peer vanished without one),
	// ErrSessionClosed after Close, another error for a broken connection;
	// every later call returns the same error.
	Recv() (LiveEvent, error)
	// SendAudio writes one chunk of PCM16LE mono 16 kHz audio; pcm is not
	// retained after it returns.
	SendAudio(pcm16k []byte) error
	// SendAudioEnd says the microphone paused (audioStreamEnd).
	SendAudioEnd() error
	// SendText sends one complete user turn typed as text.
	SendText(text string) error
	// SendContext adds a user-role note to the conversation without asking
	// the model to answer (clientContent with turnComplete false).
	SendContext(text string) error
	SendToolResponses(results []FunctionResult) error
	// Close ends the connection and unblocks Recv. It is idempotent and safe
	// from any goroutine.
	Close() error
}

// LiveFast is a LiveSession served by an event loop (Linux, and the
// adapter asked to): its sends never wait for the network, and a message
// that is model audio alone (no transcript, no flag) can be handed to a
// sink where it is read, on the loop's goroutine, while the goroutine that
// calls Recv waits in it — rather than wake that goroutine for each. What
// the sink takes and what Recv returns are in the order they came.
type LiveFast interface {
	// SetAudioSink sets the sink (nil: none); called by the goroutine that
	// calls Recv, between its calls. False: this session has no loop, and
	// every message comes through Recv.
	SetAudioSink(AudioSink) bool
	// SendsWait reports whether a send may wait for the network (no loop).
	SendsWait() bool
}

// AudioSink takes model audio on an event loop's goroutine (LiveFast),
// while the goroutine that calls Recv waits in it: it may use what that
// goroutine owns. It must not wait.
type AudioSink interface {
	// Ready reports whether Audio may be called now; false leaves the
	// message, and all after it until Recv is called again, to Recv.
	Ready() bool
	// Audio takes one part of model audio (PCM16LE mono 24 kHz), valid
	// only during the call.
	Audio(pcm []byte)
}

// ErrSessionClosed is what Recv returns, and sends return, after Close.
var ErrSessionClosed = errors.New("upstream session closed")

// LiveModel opens realtime sessions. Connect honours ctx and the adapter's
// own connect timeout, and leaves nothing running when it fails.
type LiveModel interface {
	Connect(ctx context.Context, cfg LiveConfig) (LiveSession, error)
}

// CloseError is a close frame from the upstream.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string { return fmt.Sprintf("upstream closed: %d %s", e.Code, e.Reason) }
