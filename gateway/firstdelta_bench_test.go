package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/stages"
)

// lastRequest answers like always and keeps the newest request, so that the
// direct SDK call can send exactly what the gateway sent.
type lastRequest struct {
	reply fakegemini.Reply
	mu    sync.Mutex
	req   *fakegemini.Request
}

func (l *lastRequest) Respond(_ context.Context, r *fakegemini.Request) fakegemini.Reply {
	l.mu.Lock()
	l.req = r
	l.mu.Unlock()
	return l.reply
}

func (l *lastRequest) last() *fakegemini.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.req
}

// BenchmarkTextFirstDelta measures what the gateway adds to the first
// text.delta a browser sees: each iteration is one turn through the gateway
// (browser WebSocket, a real redis-server, the genai SDK to the fake
// Gemini) timed from sending the user's `text` to reading the first
// `text.delta`, then the same request (the gateway's own, as the fake
// received it) sent straight to the same fake with the genai SDK, timed
// from the call to its first chunk; and that request once more, its
// contents encoded at once and handed to the SDK through its body hook as
// the gateway's adapter does (geminitext's encodeContents), so that what
// the gateway adds is also seen apart from how it encodes. The three
// alternate, so the noise of a shared machine falls on all. Reported: p50
// and p95 of each in ms, and the differences (gateway − direct, gateway −
// direct with the adapter's encoding) at p50 and p95.
//
//	go test -run '^$' -bench BenchmarkTextFirstDelta -benchtime 2000x ./gateway
//
// Built with -tags stages (and run with -v) it also prints where the
// first delta's time goes, stage by stage (internal/stages).
func BenchmarkTextFirstDelta(b *testing.B) {
	brain := &lastRequest{reply: fakegemini.TextReply("Beans ship within two business days of roasting.", 4)}
	fake := fakegemini.New(brain, slog.New(slog.NewTextHandler(io.Discard, nil)))
	url, err := fake.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fake.Close() })

	cfg := defaultTestConfig(b)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(b))
	cfg.GeminiAPIKey, cfg.GeminiBaseURL = "test", gateway.SecretURL(url)
	g := startGateway(b, unlimited(cfg), nil)
	c := g.dial("", nil)
	c.start(nil)

	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendGeminiAPI, APIKey: "test", HTTPOptions: genai.HTTPOptions{BaseURL: url},
	})
	if err != nil {
		b.Fatal(err)
	}

	viaGateway := make([]time.Duration, 0, b.N)
	direct := make([]time.Duration, 0, b.N)
	encoded := make([]time.Duration, 0, b.N)
	var gwStages, directStages stageTimes
	firstChunk := func(contents []*genai.Content, conf *genai.GenerateContentConfig) time.Duration {
		t0 := time.Now()
		stages.Mark(stages.Sent)
		first := time.Duration(0)
		for _, err := range client.Models.GenerateContentStream(ctx, brain.last().Model, contents, conf) {
			if err != nil {
				b.Fatal(err)
			}
			if first == 0 {
				first = time.Since(t0)
				stages.Mark(stages.ClientDelta)
			}
		}
		return first
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stages.Take()
		t0 := time.Now()
		stages.Mark(stages.Sent)
		c.send(map[string]any{"type": "text", "text": "when do you ship?"})
		first := time.Duration(0)
		for {
			ev := c.next()
			if ev.typ() == "turn.start" {
				stages.Mark(stages.ClientStart)
			}
			if first == 0 && ev.typ() == "text.delta" {
				first = time.Since(t0)
				stages.Mark(stages.ClientDelta)
			}
			if ev.typ() == "turn.done" {
				break
			}
		}
		if first == 0 {
			b.Fatal("a turn without a text.delta")
		}
		viaGateway = append(viaGateway, first)
		gwStages.add(stages.Take())

		req := brain.last()
		conf := &genai.GenerateContentConfig{
			SystemInstruction: req.SystemInstruction, Tools: req.Tools, ToolConfig: req.ToolConfig,
		}
		direct = append(direct, firstChunk(req.Contents, conf))
		directStages.add(stages.Take())

		t0 = time.Now()
		raw, err := json.Marshal(req.Contents)
		if err != nil {
			b.Fatal(err)
		}
		enc := *conf
		enc.HTTPOptions = &genai.HTTPOptions{ExtrasRequestProvider: func(body map[string]any) map[string]any {
			body["contents"] = json.RawMessage(raw)
			return body
		}}
		encoded = append(encoded, time.Since(t0)+firstChunk(nil, &enc))
		stages.Take()
	}
	b.StopTimer()
	gp50, gp95 := percentiles(viaGateway)
	dp50, dp95 := percentiles(direct)
	ep50, ep95 := percentiles(encoded)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(gp50), "gw-p50-ms")
	b.ReportMetric(ms(gp95), "gw-p95-ms")
	b.ReportMetric(ms(dp50), "direct-p50-ms")
	b.ReportMetric(ms(dp95), "direct-p95-ms")
	b.ReportMetric(ms(gp50-dp50), "added-p50-ms")
	b.ReportMetric(ms(gp95-dp95), "added-p95-ms")
	b.ReportMetric(ms(ep50), "direct-enc-p50-ms")
	b.ReportMetric(ms(ep95), "direct-enc-p95-ms")
	b.ReportMetric(ms(gp50-ep50), "added-enc-p50-ms")
	b.ReportMetric(ms(gp95-ep95), "added-enc-p95-ms")
	if stages.On {
		b.Logf("through the gateway, median ms since the frame was sent:\n%s", gwStages.table())
		b.Logf("direct, median ms since the call:\n%s", directStages.table())
	}
}

// stageTimes collects each turn's marks (built with -tags stages).
type stageTimes [][stages.NumStages]int64

func (st *stageTimes) add(t [stages.NumStages]int64) { *st = append(*st, t) }

// after is each stage's cause: the stage it follows on its own path. The
// store's round trip (launched, verdict, turn.start written and read) runs
// beside the model request (turn-runs to the first delta).
var after = map[stages.Stage]stages.Stage{
	stages.Read: stages.Sent, stages.Input: stages.Read, stages.TurnRuns: stages.Input, stages.Built: stages.TurnRuns,
	stages.FakeGot: stages.Built, stages.FakeDecoded: stages.FakeGot, stages.FakeFirst: stages.FakeDecoded,
	stages.FirstChunk: stages.FakeFirst, stages.Admitted: stages.FirstChunk, stages.DeltaQueued: stages.Admitted,
	stages.Wrote2: stages.DeltaQueued, stages.ClientDelta: stages.Wrote2,
	stages.Launched: stages.Input, stages.Verdict: stages.Launched, stages.Wrote1: stages.Verdict,
	stages.ClientStart: stages.Wrote1,
}

// table lists, per stage reached, the median time since stages.Sent and
// the median of each turn's step from the stage it follows (after; for the
// direct call, the nearest earlier stage it reached).
func (st *stageTimes) table() string {
	var out strings.Builder
	for s := stages.Stage(1); s < stages.NumStages; s++ {
		var since, step []time.Duration
		for _, t := range *st {
			if t[s] == 0 || t[stages.Sent] == 0 {
				continue
			}
			since = append(since, time.Duration(t[s]-t[stages.Sent]))
			p := after[s]
			for p > stages.Sent && t[p] == 0 {
				p = after[p]
			}
			step = append(step, time.Duration(t[s]-t[p]))
		}
		if len(since) == 0 || len(since) < len(*st)/2 {
			continue // a stage this path does not pass
		}
		p50, _ := percentiles(since)
		s50, _ := percentiles(step)
		p := after[s]
		fmt.Fprintf(&out, "%-13s %7.3f  %+7.3f after %s\n", s, float64(p50)/1e6, float64(s50)/1e6, p)
	}
	return out.String()
}

// percentiles returns the 50th and 95th percentile of ds (sorting it).
func percentiles(ds []time.Duration) (p50, p95 time.Duration) {
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*95/100]
}
