package fakegemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/genai"
)

// ErrLiveClosed is returned by a LiveSession emitter once the connection is
// closing or gone.
var ErrLiveClosed = errors.New("fakegemini: live connection closed")

// liveQueue is how many server frames may wait for the writer; emitters
// block (until the connection ends) when it is full.
const liveQueue = 64

// LiveSession is one Live connection as its brain sees it: the decoded
// setup, the client's messages, and emitters for every server message.
// Emitters are safe to call from any goroutine; they queue the frame for
// the connection's single writer, in call order, and fail with
// ErrLiveClosed once the connection is closing.
type LiveSession struct {
	// ID names the connection in logs ("live-1", "live-2", ...).
	ID string
	// API is the API the client connected to (GeminiAPI or VertexAI);
	// APIVersion is from the URL: "v1beta", "v1alpha" or "v1" on the Gemini
	// API, "v1beta1" or "v1" on Vertex AI.
	API        API
	APIVersion string
	// Header is a copy of the upgrade request's headers.
	Header http.Header
	Setup  LiveSetup
	// Resumed is true when the setup carried a handle issued by this
	// server; State then starts as the state stored under it.
	Resumed bool

	srv  *Server
	conn *websocket.Conn
	log  *slog.Logger

	ctx        context.Context // the brain's: ends with the connection or the server
	cancel     context.CancelFunc
	connCtx    context.Context // the socket's: ends when it is closed or broken
	connCancel context.CancelFunc

	events     chan ClientEvent
	out        chan liveFrame
	writerDone chan struct{}
	callSeq    atomic.Uint64

	closeMu sync.Mutex
	closing bool

	mu      sync.Mutex
	state   any
	record  bool
	frames  [][]byte
	playout time.Time // when the current turn's audio ends playing (Speak)

	strict bool     // strict mode was on when the connection started
	turn   liveTurn // what strict mode knows of the model's turn and calls
}

// liveFrame is one queued server frame, or the close frame that ends the
// queue. note is what strict mode learns from it once it is written.
type liveFrame struct {
	data   []byte
	note   frameNote
	close  bool
	code   websocket.StatusCode
	reason string
}

// Context ends when the connection ends (client hang-up, close, server
// shutdown).
func (s *LiveSession) Context() context.Context { return s.ctx }

// Events delivers the client's messages in arrival order. It is closed when
// the client hangs up or the connection is closed. A brain that stops
// reading it stalls the connection's reader, as a real server applies
// backpressure.
func (s *LiveSession) Events() <-chan ClientEvent { return s.events }

// State returns the conversation state the brain stored with SetState (or
// the state resumed from the setup's handle).
func (s *LiveSession) State() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// SetState stores the conversation state that SendResumptionUpdate saves
// under its new handle. Store values, or pointers the brain no longer
// mutates: a handle keeps what it was given.
func (s *LiveSession) SetState(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = v
}

// Frames returns every raw frame the client sent on this connection, the
// setup first, when the server's LiveBrain is a LiveScript (other brains
// record nothing, so long demo sessions do not grow without bound).
func (s *LiveSession) Frames() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.frames))
	for i, f := range s.frames {
		out[i] = append([]byte(nil), f...)
	}
	return out
}

func (s *LiveSession) recordFrame(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.record {
		s.frames = append(s.frames, append([]byte(nil), data...))
	}
}

// SendAudio speaks pcm (PCM16LE mono 24 kHz) as one modelTurn inlineData
// part with mimeType audio/pcm;rate=24000.
func (s *LiveSession) SendAudio(pcm []byte) error { return s.Send(audioMessage(pcm)) }

// SendText sends a modelTurn text part, as a TEXT-modality model does.
func (s *LiveSession) SendText(text string) error {
	return s.Send(modelTurnPart(map[string]any{"text": text}))
}

// SendInputTranscript sends a piece of the transcription of the user's
// speech.
func (s *LiveSession) SendInputTranscript(text string) error {
	return s.Send(transcriptionMessage("inputTranscription", text))
}

// SendOutputTranscript sends a piece of the transcription of the model's
// speech.
func (s *LiveSession) SendOutputTranscript(text string) error {
	return s.Send(transcriptionMessage("outputTranscription", text))
}

// SendGenerationComplete says the model has generated its whole answer
// (playback may still be going on).
func (s *LiveSession) SendGenerationComplete() error {
	return s.Send(serverContent(map[string]any{"generationComplete": true}))
}

// SendTurnComplete ends the model's turn, with usage (nil for none); Live
// usage counts output in responseTokenCount (Vertex AI sends it as
// candidatesTokenCount, which its SDK converts back).
func (s *LiveSession) SendTurnComplete(usage *genai.UsageMetadata) error {
	return s.Send(turnCompleteMessage(usage, s.API))
}

// SendInterrupted says the user spoke over the model: the client drops the
// audio it has queued. The real service follows it with turnComplete.
func (s *LiveSession) SendInterrupted() error {
	return s.Send(serverContent(map[string]any{"interrupted": true}))
}

// SendToolCall asks the client to run calls, in one toolCall message. Calls
// without an ID get a fresh one ("function-call-N"); it returns the IDs in
// order.
func (s *LiveSession) SendToolCall(calls ...Call) ([]string, error) {
	ids := make([]string, len(calls))
	withIDs := make([]Call, len(calls))
	for i, c := range calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("function-call-%d", s.callSeq.Add(1))
		}
		ids[i], withIDs[i] = c.ID, c
	}
	return ids, s.Send(toolCallMessage(withIDs))
}

// SendToolCallCancellation withdraws earlier tool calls.
func (s *LiveSession) SendToolCallCancellation(ids ...string) error {
	return s.Send(map[string]any{"toolCallCancellation": map[string]any{"ids": ids}})
}

// SendGoAway warns that the connection ends in timeLeft, sent as a
// protobuf Duration string ("50s"). It does not close anything: the brain
// calls Close when the time is up.
func (s *LiveSession) SendGoAway(timeLeft time.Duration) error {
	return s.Send(goAwayMessage(timeLeft))
}

// SendResumptionUpdate tells the client where it could resume. With
// resumable true it stores the current State under a new opaque handle,
// valid for the server's lifetime, sends it, and returns it. With false it
// sends the empty update the real service sends mid-generation, and
// returns "".
func (s *LiveSession) SendResumptionUpdate(resumable bool) (string, error) {
	if !resumable {
		return "", s.Send(resumptionMessage(""))
	}
	h := s.srv.live.handles.issue(s.State())
	return h, s.Send(resumptionMessage(h))
}

// Send queues any server message, encoded as JSON in a binary frame like
// the real service's.
func (s *LiveSession) Send(msg map[string]any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("live %s: encode server message: %w", s.ID, err)
	}
	f := liveFrame{data: data}
	if s.strict {
		f.note = observeFrame(data)
	}
	return s.enqueue(f)
}

// Close ends the connection with a close frame carrying code and reason
// (at most 123 bytes), after the frames queued before it, e.g.
// Close(1011, "Internal error occurred."). Later emitter calls fail with
// ErrLiveClosed; so does a second Close.
func (s *LiveSession) Close(code int, reason string) error {
	switch {
	case !(code >= 1000 && code <= 1014 || code >= 3000 && code <= 4999), code == 1004, code == 1005, code == 1006:
		return fmt.Errorf("live %s: close code %d cannot be sent in a close frame", s.ID, code)
	case len(reason) > 123:
		reason = strings.ToValidUTF8(reason[:123], "")
	}
	return s.enqueue(liveFrame{close: true, code: websocket.StatusCode(code), reason: reason})
}

// enqueue hands f to the writer. The lock orders emitters and makes Close
// final: nothing is queued after the close frame.
func (s *LiveSession) enqueue(f liveFrame) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closing || s.connCtx.Err() != nil {
		return ErrLiveClosed
	}
	if f.close {
		s.closing = true
	}
	select {
	case s.out <- f:
		return nil
	case <-s.connCtx.Done():
		return ErrLiveClosed
	}
}
