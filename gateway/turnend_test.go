package gateway_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/otlptest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/timeline"
	"github.com/turnstile-gw/turnstile/tracing"
)

// A text turn and a voice turn of one session end alike: each is on the
// operator's timeline with its mode, input, answer, end reason and times;
// each has its trace, whose root carries the same attributes (the voice
// turn's voice-to-voice latency aside, which text has no use for); and
// each is counted and timed in the turn metrics. A mode whose turn end
// forgot its span, its timeline entry or its record fails here.
func TestTextAndVoiceTurnsEndAlikeOnTheTimelineTheTraceAndTheMetrics(t *testing.T) {
	rcv := otlptest.StartGRPC(t)
	cfg := tracedConfig(t, rcv, nil)
	g, script := startVoiceGateway(t, cfg, fakegemini.NewScript(textStep("We open at nine.")))
	c := g.dial("", nil)
	ready := c.start(map[string]any{"traceparent": browserTraceparent})
	id := ready.str("sessionId")

	if end := last(c.ask("When do you open?")); end.str("reason") != "end_turn" {
		t.Fatalf("text turn.done %v", end)
	}
	c.send(map[string]any{"type": "voice.start"})
	if ev := last(c.until("mode")); ev.str("mode") != "voice" {
		t.Fatalf("mode %v, want voice", ev)
	}
	u := nextUpstream(t, script)
	// The fake checks what the gateway sends against what it has said: it
	// must have read the history seed before it speaks, or the seed reads
	// as sent over its speech (the gateway wrote it first).
	testwait.For(t, "the text history upstream", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	must(t, u.SendInputTranscript("And on Sundays?"))
	must(t, u.SendOutputTranscript("Closed on Sundays."))
	must(t, u.SendAudio(pcm24Tone(440, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if end := last(events(c.recvUntil("turn.done"))); end.str("reason") != "end_turn" || end["turn"] != 2.0 {
		t.Fatalf("voice turn.done %v", end)
	}

	// The timeline.
	view := waitTimeline(t, g.adminURL, id, "both turns on the timeline",
		func(v timeline.View) bool { return len(v.Turns) == 2 })
	for i, want := range []struct{ mode, input, answer string }{
		{"text", "When do you open?", "We open at nine."},
		{"voice", "And on Sundays?", "Closed on Sundays."},
	} {
		tt := view.Turns[i]
		if tt.Turn != i+1 || tt.Mode != want.mode || tt.Input != want.input || tt.Answer != want.answer ||
			tt.EndReason != "end_turn" || tt.Session != id || tt.User == "" || tt.Start.IsZero() || tt.End.Before(tt.Start) {
			t.Errorf("%s turn on the timeline: %+v", want.mode, tt)
		}
	}

	// The traces: one per turn, their roots alike.
	roots := map[string]otlptest.Span{}
	for _, spans := range flushedSpans(t, g, rcv) {
		root := rootOf(t, spans)
		roots[root.Attrs["turnstile.mode"].(string)] = root
	}
	text, voice := roots["text"], roots["voice"]
	if len(roots) != 2 || text.Name == "" || voice.Name == "" {
		t.Fatalf("turn roots by mode %v, want one text and one voice", slices.Sorted(maps.Keys(roots)))
	}
	delete(voice.Attrs, string(tracing.AttrVoiceResponseMs))
	if tk, vk := slices.Sorted(maps.Keys(text.Attrs)), slices.Sorted(maps.Keys(voice.Attrs)); !slices.Equal(tk, vk) {
		t.Errorf("the roots' attributes differ:\n text  %v\n voice %v", tk, vk)
	}
	for mode, r := range roots {
		if r.Attrs["turnstile.turn.end_reason"] != "end_turn" || r.Attrs["gen_ai.conversation.id"] != id ||
			r.Attrs["enduser.pseudo.id"] != text.Attrs["enduser.pseudo.id"] || len(r.Links) != 1 {
			t.Errorf("%s root %+v", mode, r)
		}
	}

	// The metrics.
	scrape := scrapeSamples(t, g.adminURL+"/metrics")
	for _, mode := range []string{"text", "voice"} {
		if n := selected(t, scrape, pqSelector{name: "turnstile_turns_total",
			matchers: []pqMatcher{{"mode", "=", mode}, {"reason", "=", "end_turn"}}}); n != 1 {
			t.Errorf("turns_total{mode=%s,reason=end_turn} = %v, want 1", mode, n)
		}
		if n := selected(t, scrape, pqSelector{name: "turnstile_turn_duration_seconds_count",
			matchers: []pqMatcher{{"mode", "=", mode}}}); n != 1 {
			t.Errorf("turn_duration_seconds_count{mode=%s} = %v, want 1", mode, n)
		}
	}
}
