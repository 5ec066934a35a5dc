package gateway_test

import (
	"context"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
)

type openAIBrainFunc func(*fakeopenai.Request) fakeopenai.Reply

func (f openAIBrainFunc) Respond(_ context.Context, r *fakeopenai.Request) fakeopenai.Reply {
	return f(r)
}

// BenchmarkTextTurnOpenAI is BenchmarkTextTurn with the openai text
// provider: the real openai-go SDK streaming from the fake OpenAI server.
func BenchmarkTextTurnOpenAI(b *testing.B) {
	reply := fakeopenai.TextReply("Beans ship within two business days of roasting.", 4)
	benchOpenAITurns(b, openAIBrainFunc(func(*fakeopenai.Request) fakeopenai.Reply { return reply }), "when do you ship?")
}

// BenchmarkTextTurnWithToolCallOpenAI is BenchmarkTextTurnWithToolCall with
// the openai text provider; the call's arguments arrive in three fragments.
func BenchmarkTextTurnWithToolCallOpenAI(b *testing.B) {
	benchOpenAITurns(b, openAIBrainFunc(func(req *fakeopenai.Request) fakeopenai.Reply {
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			return fakeopenai.TextReply("Beans ship within two business days of roasting.", 4)
		}
		return fakeopenai.CallReply(fakeopenai.Call{ID: "call_bench", Name: "kb_search", Args: `{"query":"shipping time","limit":3}`})
	}), "when do you ship?")
}

func benchOpenAITurns(b *testing.B, brain fakeopenai.Brain, question string) {
	b.Setenv("OPENAI_BASE_URL", "")
	b.Setenv("OPENAI_API_KEY", "")
	cfg := unlimited(defaultTestConfig(b))
	cfg.TextProvider = "openai"
	g := startGatewayWith(b, cfg, brains{openai: brain})
	c := g.dial("", nil)
	c.start(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		evs := c.ask(question)
		if last(evs).str("reason") != "end_turn" {
			b.Fatalf("turn ended %v", last(evs))
		}
	}
}
