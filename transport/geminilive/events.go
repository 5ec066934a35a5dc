package geminilive

import (
	"strings"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
)

// events translates one server message into neutral events, in this order:
// input transcription, model turn parts (audio and text, in part order),
// output transcription, interrupted, generationComplete, turnComplete, tool
// calls, tool cancellations, goAway, resumption update. The real service
// sends one of these per message; the order only matters for a message
// that carries several. setupComplete (echoed by the SDK's first Receive)
// and usageMetadata yield nothing.
func events(msg *genai.LiveServerMessage) []transport.LiveEvent {
	var out []transport.LiveEvent
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
				case p.InlineData != nil && strings.HasPrefix(p.InlineData.MIMEType, "audio/pcm"):
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
		if sc.Interrupted {
			out = append(out, transport.LiveEvent{Kind: transport.LiveInterrupted})
		}
		if sc.GenerationComplete {
			out = append(out, transport.LiveEvent{Kind: transport.LiveGenerationComplete})
		}
		if sc.TurnComplete {
			out = append(out, transport.LiveEvent{Kind: transport.LiveTurnComplete})
		}
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
