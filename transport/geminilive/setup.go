package geminilive

import (
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

// connectConfig is the setup the upstream receives: audio out with both
// transcriptions, the tools, compression, and resumption updates (resuming
// when cfg carries a handle).
func (m *Model) connectConfig(cfg transport.LiveConfig) *genai.LiveConnectConfig {
	lc := &genai.LiveConnectConfig{
		ResponseModalities:       []genai.Modality{genai.ModalityAudio},
		InputAudioTranscription:  &genai.AudioTranscriptionConfig{},
		OutputAudioTranscription: &genai.AudioTranscriptionConfig{},
		// An empty handle still asks for sessionResumptionUpdate messages.
		SessionResumption: &genai.SessionResumptionConfig{Handle: cfg.ResumeHandle},
	}
	lc.SystemInstruction = geminitext.SystemInstruction(cfg.System)
	lc.Tools = geminitext.Tools(cfg.Tools)
	if !m.opts.NoCompression {
		cw := &genai.ContextWindowCompressionConfig{SlidingWindow: &genai.SlidingWindow{}}
		if m.opts.TriggerTokens > 0 {
			cw.TriggerTokens = genai.Ptr(m.opts.TriggerTokens)
		}
		if m.opts.TargetTokens > 0 {
			cw.SlidingWindow.TargetTokens = genai.Ptr(m.opts.TargetTokens)
		}
		lc.ContextWindowCompression = cw
	}
	if m.opts.Voice != "" {
		lc.SpeechConfig = &genai.SpeechConfig{VoiceConfig: &genai.VoiceConfig{
			PrebuiltVoiceConfig: &genai.PrebuiltVoiceConfig{VoiceName: m.opts.Voice}}}
	}
	return lc
}

// liveHistory converts the conversation so far into the contents that seed
// a new Live session. Only user and model text survives: a text history's
// function calls and responses cannot be replayed into Live (their IDs
// belong to another API, and Live takes function results only as
// toolResponse answers to its own toolCall), so tool entries are dropped and
// a model entry keeps just its text. The answers the
// tools produced are still there in the model's text that followed them.
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
