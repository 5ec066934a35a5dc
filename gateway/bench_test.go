package gateway_test

import (
	"context"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// always answers every request with the same reply.
type always struct{ r fakegemini.Reply }

func (a always) Respond(context.Context, *fakegemini.Request) fakegemini.Reply { return a.r }

// BenchmarkTextTurn measures one whole text turn as a browser sees it:
// WebSocket in, Redis writes, the real genai SDK streaming from the fake
// Gemini server over loopback HTTP, deltas out, turn.done.
func BenchmarkTextTurn(b *testing.B) {
	benchTurns(b, always{fakegemini.TextReply("Beans ship within two business days of roasting.", 4)}, "when do you ship?")
}

// BenchmarkTextTurnRealRedis is BenchmarkTextTurn against a real
// redis-server: the store's Lua scripts run there, not in the embedded
// miniredis (whose Lua interpreter allocates per call, in-process).
func BenchmarkTextTurnRealRedis(b *testing.B) {
	cfg := defaultTestConfig(b)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(b))
	benchTurnsWith(b, cfg, always{fakegemini.TextReply("Beans ship within two business days of roasting.", 4)}, "when do you ship?")
}

// BenchmarkTextTurnWithToolCall adds one model↔tool round: a kb_search over
// the sample knowledge base, its result sent back, then the answer.
func BenchmarkTextTurnWithToolCall(b *testing.B) {
	brain := brainFunc(func(req *fakegemini.Request) fakegemini.Reply {
		lastContent := req.Contents[len(req.Contents)-1]
		if lastContent.Parts[0].FunctionResponse != nil {
			return fakegemini.TextReply("Beans ship within two business days of roasting.", 4)
		}
		return fakegemini.CallReply(fakegemini.Call{Name: "kb_search", Args: map[string]any{"query": "shipping time", "limit": 3}})
	})
	benchTurns(b, brain, "when do you ship?")
}

// unlimited lifts the per-connection and per-user limits for benchmarks,
// which take turns as fast as the gateway serves them.
func unlimited(cfg gateway.Config) gateway.Config {
	cfg.MessageRate, cfg.MessageBurst, cfg.TurnsPerMinute = 1e9, 1e9, 0
	return cfg
}

type brainFunc func(*fakegemini.Request) fakegemini.Reply

func (f brainFunc) Respond(_ context.Context, r *fakegemini.Request) fakegemini.Reply { return f(r) }

func benchTurns(b *testing.B, brain fakegemini.Brain, question string) {
	benchTurnsWith(b, defaultTestConfig(b), brain, question)
}

func benchTurnsWith(b *testing.B, cfg gateway.Config, brain fakegemini.Brain, question string) {
	g := startGateway(b, unlimited(cfg), brain)
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
