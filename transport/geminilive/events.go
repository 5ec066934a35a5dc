package geminilive

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
)

// serverMessage is a server message decoded in full: genai's type, plus
// the error the SDK's Receive refuses a message for, and the usage in
// either API's field names (it shadows genai's UsageMetadata).
type serverMessage struct {
	genai.LiveServerMessage
	Error json.RawMessage `json:"error"`
	Usage *usageWire      `json:"usageMetadata"`
}

// usageWire is Live's usageMetadata: the Gemini API says response, Vertex
// AI candidates (its SDK renames them; this adapter reads both).
type usageWire struct {
	PromptTokenCount        int              `json:"promptTokenCount"`
	ResponseTokenCount      int              `json:"responseTokenCount"`
	CandidatesTokenCount    int              `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int              `json:"thoughtsTokenCount"`
	PromptTokensDetails     []modalityTokens `json:"promptTokensDetails"`
	ResponseTokensDetails   []modalityTokens `json:"responseTokensDetails"`
	CandidatesTokensDetails []modalityTokens `json:"candidatesTokensDetails"`
}

type modalityTokens struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

// event is the neutral usage event: output is the response (or
// candidates) plus thinking, billed as output.
func (u *usageWire) event() transport.LiveEvent {
	byModality := func(details ...[]modalityTokens) map[string]int {
		var m map[string]int
		for _, ds := range details {
			for _, d := range ds {
				if d.TokenCount <= 0 {
					continue
				}
				if m == nil {
					m = map[string]int{}
				}
				m[strings.ToLower(strings.TrimPrefix(d.Modality, "MODALITY_"))] += d.TokenCount
			}
		}
		return m
	}
	return transport.LiveEvent{Kind: transport.LiveTokens, Usage: &transport.LiveUsage{
		Input:            max(u.PromptTokenCount, 0),
		Output:           max(u.ResponseTokenCount, 0) + max(u.CandidatesTokenCount, 0) + max(u.ThoughtsTokenCount, 0),
		InputByModality:  byModality(u.PromptTokensDetails),
		OutputByModality: byModality(u.ResponseTokensDetails, u.CandidatesTokensDetails),
	}}
}

// decodeMessage decodes a server message the way the SDK's Receive does
// for the Gemini API: JSON straight into genai.LiveServerMessage (unknown
// fields ignored, durations and int64s as strings), and an error for a
// message that is not JSON or carries a non-null "error".
func decodeMessage(data []byte) (*serverMessage, error) {
	msg := new(serverMessage)
	if err := json.Unmarshal(data, msg); err != nil {
		return nil, fmt.Errorf("gemini live: invalid message %.200q: %w", data, err)
	}
	if len(msg.Error) > 0 && string(msg.Error) != "null" {
		return nil, fmt.Errorf("gemini live: error from the upstream: %.500s", msg.Error)
	}
	return msg, nil
}

// appendEvents translates one server message into neutral events, in this
// order: input transcription, model turn parts (audio and text, in part
// order), output transcription, interrupted, generationComplete,
// turnComplete, tool calls, tool cancellations, goAway, resumption update.
// The real service sends one of these per message; the order only matters
// for a message that carries several. setupComplete yields nothing, and
// usageMetadata is decodeMessage's (serverMessage.Usage). scanAudio keeps
// to the same order.
func appendEvents(out []transport.LiveEvent, msg *genai.LiveServerMessage) []transport.LiveEvent {
	if sc := msg.ServerContent; sc != nil {
		if t := sc.InputTranscription; t != nil && t.Text != "" {
			out = append(out, transport.LiveEvent{Kind: transport.LiveInputTranscript, Text: t.Text})
		}
		if sc.ModelTurn != nil {
			for _, p := range sc.ModelTurn.Parts {
				switch {
				case p == nil || p.Thought:
					// Native-audio models narrate their thinking as text
					// parts; that is not something to show or say.
				case p.InlineData != nil && strings.HasPrefix(p.InlineData.MIMEType, audioOutMIME):
					if len(p.InlineData.Data) > 0 {
						out = append(out, transport.LiveEvent{Kind: transport.LiveAudio, Audio: p.InlineData.Data})
					}
				case p.Text != "":
					out = append(out, transport.LiveEvent{Kind: transport.LiveText, Text: p.Text})
				}
			}
		}
		if t := sc.OutputTranscription; t != nil && t.Text != "" {
			out = append(out, transport.LiveEvent{Kind: transport.LiveOutputTranscript, Text: t.Text})
		}
		out = appendFlags(out, sc.Interrupted, sc.GenerationComplete, sc.TurnComplete)
	}
	if tc := msg.ToolCall; tc != nil && len(tc.FunctionCalls) > 0 {
		calls := make([]transport.FunctionCall, 0, len(tc.FunctionCalls))
		for _, fc := range tc.FunctionCalls {
			if fc == nil {
				continue
			}
			calls = append(calls, transport.FunctionCall{ID: fc.ID, Name: fc.Name, Args: fc.Args})
		}
		out = append(out, transport.LiveEvent{Kind: transport.LiveToolCall, Calls: calls})
	}
	if c := msg.ToolCallCancellation; c != nil && len(c.IDs) > 0 {
		out = append(out, transport.LiveEvent{Kind: transport.LiveToolCancel, IDs: c.IDs})
	}
	if g := msg.GoAway; g != nil {
		out = append(out, transport.LiveEvent{Kind: transport.LiveGoAway, TimeLeft: g.TimeLeft})
	}
	if u := msg.SessionResumptionUpdate; u != nil {
		out = append(out, transport.LiveEvent{Kind: transport.LiveResumption, Handle: u.NewHandle, Resumable: u.Resumable})
	}
	return out
}

// audioOutMIME prefixes the MIME type of model audio: PCM16LE mono 24 kHz
// ("audio/pcm;rate=24000").
const audioOutMIME = "audio/pcm"

// appendFlags appends the serverContent flags' events in their order.
func appendFlags(out []transport.LiveEvent, interrupted, generationComplete, turnComplete bool) []transport.LiveEvent {
	if interrupted {
		out = append(out, transport.LiveEvent{Kind: transport.LiveInterrupted})
	}
	if generationComplete {
		out = append(out, transport.LiveEvent{Kind: transport.LiveGenerationComplete})
	}
	if turnComplete {
		out = append(out, transport.LiveEvent{Kind: transport.LiveTurnComplete})
	}
	return out
}
