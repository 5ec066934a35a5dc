package geminilive

import (
	"cmp"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

// The control messages are genai's own types encoded with encoding/json:
// the same JSON the SDK sends for them, minus its map round trips (the
// wire test compares the two). Only the audio frames are built by hand.

// setupMessage is the first frame of a connection: audio out with both
// transcriptions, the tools, compression, and resumption updates (resuming
// when cfg carries a handle).
func (m *Model) setupMessage(cfg transport.LiveConfig) ([]byte, error) {
	tools, err := liveTools(cfg.Tools)
	if err != nil {
		return nil, err
	}
	setup := &genai.LiveClientSetup{
		Model: m.ep.model,
		GenerationConfig: &genai.GenerationConfig{
			ResponseModalities: []genai.Modality{genai.ModalityAudio},
		},
		SystemInstruction:        geminitext.SystemInstruction(cfg.System),
		Tools:                    tools,
		InputAudioTranscription:  &genai.AudioTranscriptionConfig{},
		OutputAudioTranscription: &genai.AudioTranscriptionConfig{},
		// An empty handle still asks for sessionResumptionUpdate messages.
		SessionResumption: &genai.SessionResumptionConfig{Handle: cfg.ResumeHandle},
	}
	if !m.opts.NoCompression {
		cw := &genai.ContextWindowCompressionConfig{SlidingWindow: &genai.SlidingWindow{}}
		if m.opts.TriggerTokens > 0 {
			cw.TriggerTokens = genai.Ptr(m.opts.TriggerTokens)
		}
		if m.opts.TargetTokens > 0 {
			cw.SlidingWindow.TargetTokens = genai.Ptr(m.opts.TargetTokens)
		}
		setup.ContextWindowCompression = cw
	}
	setup.GenerationConfig.SpeechConfig = speechConfig(cmp.Or(cfg.Voice, m.opts.Voice), cfg.LanguageCode)
	return json.Marshal(genai.LiveClientMessage{Setup: setup})
}

// liveTools declares the tools with Gemini-native schemas (each function's
// "parameters"), as the spec's voice architecture has it; text models get
// JSON Schema instead. A tool whose schema has no native rendering
// (ParametersOpenAPI nil) is declared with its JSON Schema
// ("parametersJsonSchema") rather than left out.
func liveTools(ts []transport.ToolDecl) ([]*genai.Tool, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	decls := make([]*genai.FunctionDeclaration, 0, len(ts))
	for _, t := range ts {
		d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
		if len(t.ParametersOpenAPI) > 0 {
			d.Parameters = new(genai.Schema)
			if err := json.Unmarshal(t.ParametersOpenAPI, d.Parameters); err != nil {
				return nil, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
			}
		} else {
			d.ParametersJsonSchema = t.Parameters
		}
		decls = append(decls, d)
	}
	return []*genai.Tool{{FunctionDeclarations: decls}}, nil
}

// clientContent is one clientContent message carrying turns.
func clientContent(turns []*genai.Content, turnComplete bool) ([]byte, error) {
	return json.Marshal(genai.LiveClientMessage{
		ClientContent: &genai.LiveClientContent{Turns: turns, TurnComplete: turnComplete},
	})
}

// toolResponse answers tool calls, each under its call's ID and name.
func toolResponse(results []transport.FunctionResult) ([]byte, error) {
	frs := make([]*genai.FunctionResponse, 0, len(results))
	for _, r := range results {
		frs = append(frs, &genai.FunctionResponse{ID: r.ID, Name: r.Name, Response: r.Response})
	}
	return json.Marshal(genai.LiveClientMessage{
		ToolResponse: &genai.LiveClientToolResponse{FunctionResponses: frs},
	})
}

// liveHistory converts the conversation so far into the contents that seed
// a new Live session. Only user and model text survives: a text history's
// function calls and responses cannot be replayed into Live (their IDs
// belong to another API, and Live takes function results only as
// toolResponse answers to its own toolCall), so tool entries are dropped and
// a model entry keeps just its text. The answers the tools produced are
// still there in the model's text that followed them.
func liveHistory(history []transport.Entry) []*genai.Content {
	text := make([]transport.Entry, 0, len(history))
	for _, e := range history {
		if e.Text == "" || (e.Role != transport.RoleUser && e.Role != transport.RoleModel) {
			continue
		}
		text = append(text, transport.Entry{Role: e.Role, Text: e.Text})
	}
	return geminitext.Contents(text)
}

// speechConfig is the setup's speech config for a prebuilt voice and a
// language, nil when neither is set (the model's own).
func speechConfig(voice, language string) *genai.SpeechConfig {
	if voice == "" && language == "" {
		return nil
	}
	sc := &genai.SpeechConfig{LanguageCode: language}
	if voice != "" {
		sc.VoiceConfig = &genai.VoiceConfig{PrebuiltVoiceConfig: &genai.PrebuiltVoiceConfig{VoiceName: voice}}
	}
	return sc
}
