package fakegemini

import (
	"context"
	"encoding/json"
	"net/http"

	"google.golang.org/genai"
)

// LiveBrain decides what the fake Live model does on one connection.
// ServeLive is called once per connection, after setupComplete has been
// sent, possibly for several connections at once. It reads the client's
// messages from s.Events() and answers through s's emitters; ctx ends when
// the client hangs up, the connection is closed, or the server shuts down,
// and ServeLive must then return (Server.Close waits for it).
// When ServeLive returns the connection is closed: normally (1000) for a
// nil error, with 1011 "Internal error occurred." otherwise (unless the
// brain closed it already).
type LiveBrain interface {
	ServeLive(ctx context.Context, s *LiveSession) error
}

// LiveSetup is the decoded setup message of a Live connection.
type LiveSetup struct {
	// Model is the model id: the setup's model without the "models/" prefix
	// (Gemini API) or the "projects/.../publishers/.../models/" one (Vertex
	// AI). ModelName is the setup's model as sent.
	Model     string
	ModelName string
	// Project and Location come from a Vertex AI model name (empty on the
	// Gemini API).
	Project, Location string
	GenerationConfig  *genai.GenerationConfig
	SystemInstruction *genai.Content
	Tools             []*genai.Tool
	// SessionResumption is nil when the client did not ask for resumption
	// updates; its Handle is set when the client resumes a session.
	SessionResumption        *genai.SessionResumptionConfig
	InputAudioTranscription  *genai.AudioTranscriptionConfig
	OutputAudioTranscription *genai.AudioTranscriptionConfig
	// ContextWindowCompression has its int64s decoded whether they came as
	// JSON strings (as the SDK sends them) or numbers.
	ContextWindowCompression *genai.ContextWindowCompressionConfig
	RealtimeInputConfig      *genai.RealtimeInputConfig
	// Raw is the setup object exactly as the client sent it.
	Raw json.RawMessage
}

// FunctionDeclarations lists the declared functions of every tool.
func (s LiveSetup) FunctionDeclarations() []*genai.FunctionDeclaration {
	var out []*genai.FunctionDeclaration
	for _, t := range s.Tools {
		if t != nil {
			out = append(out, t.FunctionDeclarations...)
		}
	}
	return out
}

// ResumeHandle is the handle the client asked to resume, or "".
func (s LiveSetup) ResumeHandle() string {
	if s.SessionResumption == nil {
		return ""
	}
	return s.SessionResumption.Handle
}

// EventKind says what a ClientEvent carries.
type EventKind string

const (
	EventAudio          EventKind = "audio"          // Data: decoded PCM, MIMEType e.g. "audio/pcm;rate=16000"
	EventAudioStreamEnd EventKind = "audioStreamEnd" // the microphone paused
	EventVideo          EventKind = "video"          // Data, MIMEType: one image frame
	EventMedia          EventKind = "mediaChunks"    // Data, MIMEType: one entry of the deprecated mediaChunks
	EventText           EventKind = "text"           // Text: realtimeInput.text
	EventActivityStart  EventKind = "activityStart"  // manual voice activity: the user started
	EventActivityEnd    EventKind = "activityEnd"    // manual voice activity: the user stopped
	EventClientContent  EventKind = "clientContent"  // Turns, TurnComplete
	EventToolResponse   EventKind = "toolResponse"   // FunctionResponses
)

// ClientEvent is one decoded client message (or one field of a
// realtimeInput that carried several).
type ClientEvent struct {
	Kind              EventKind
	Data              []byte
	MIMEType          string
	Text              string
	Turns             []*genai.Content
	TurnComplete      bool
	FunctionResponses []*genai.FunctionResponse
}

// UserText joins the text parts of the user turns of a clientContent event
// (or returns Text for a realtimeInput text event).
func (e ClientEvent) UserText() string {
	if e.Kind == EventText {
		return e.Text
	}
	var out string
	for _, c := range e.Turns {
		if t := userText(c); t != "" {
			if out != "" {
				out += "\n"
			}
			out += t
		}
	}
	return out
}

// liveInfo is what the handshake learned about a connection.
type liveInfo struct {
	id         string
	api        API
	apiVersion string
	header     http.Header
	setup      LiveSetup
	resumed    bool
	state      any
	record     bool
	firstFrame []byte
}
