package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/store"
)

// End-to-end tests of the limits on what one connection, session or user
// may do (docs/operations.md, "Limits").

func TestMessageFloodIsDroppedThenClosedWith4008(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.MessageRate, cfg.MessageBurst, cfg.RateAbuseAfter = 2, 3, time.Second
	g := startGateway(t, cfg, fakegemini.NewScript())
	c := g.dial("", nil)
	c.start(nil) // session.start does not count

	// A burst of ten: three go through, the rest are dropped, and the
	// browser is told once. The run of refusals the 4008 is judged on
	// starts here: the flood below follows within the run's one-second
	// break, so the close is measured from the burst, not from the flood.
	start := time.Now()
	for range 10 {
		c.send(map[string]any{"type": "ping"})
	}
	for i := range 3 {
		if ev := c.next(); ev.typ() != "pong" {
			t.Fatalf("message %d of the burst: %v, want pong", i+1, ev)
		}
	}
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" || ev["retryable"] != true {
		t.Fatalf("after the burst: %v, want error rate_limited (retryable)", ev)
	}
	testwait.For(t, "seven refusals counted", func() bool { return g.refusals("message_rate") == 7 })

	// A flood that does not stop is closed 4008 once it has lasted
	// RateAbuseAfter; meanwhile the browser hears rate_limited at most once
	// a second.
	defer startPingFlood(c)()
	notices := 0
	for _, ev := range c.eventsUntilClose("the flood", 4008) {
		if ev.str("code") == "rate_limited" {
			notices++
		}
	}
	took := time.Since(start)
	if took < cfg.RateAbuseAfter {
		t.Fatalf("closed %v after the first refusal, before RateAbuseAfter (%v)", took, cfg.RateAbuseAfter)
	}
	if max := int(took/time.Second) + 2; notices > max {
		t.Fatalf("%d rate_limited errors in %v, want at most one a second", notices, took)
	}
	testwait.For(t, "the abuse counted", func() bool {
		return g.refusals("rate_abuse") == 1 && g.counterSum("turnstile_browser_disconnects_total") == 1
	})
}

func TestMicrophoneAudioIsPacedAtOneAndAQuarterRealTime(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.MicPace = 1.25
	g, script := startVoiceGateway(t, cfg, nil)
	c, _, u := startInVoice(t, g, script)

	// Three seconds of audio sent as fast as the socket takes it.
	start := time.Now()
	var sent []byte
	for i := range 75 {
		chunk := pcm(i, 1280)
		sent = append(sent, chunk...)
		if err := c.sendAudio(chunk); err != nil {
			t.Fatal(err)
		}
	}
	c.send(map[string]any{"type": "audio.end"})
	testwait.For(t, "audio.end upstream", func() bool { return len(u.ofKind(fakegemini.EventAudioStreamEnd)) == 1 })
	took := time.Since(start)

	got := u.audio()
	allowed := 32000 + int(took.Seconds()*1.25*32000) + 1280
	if len(got) < 32000 || len(got) > allowed || len(got) >= len(sent) {
		t.Fatalf("the model got %d of %d bytes sent in %v; want the one-second burst and the pace (at most %d)",
			len(got), len(sent), took, allowed)
	}
	// What passed is what was sent, in order: whole frames, none altered.
	if !bytes.Equal(got, sent[:len(got)]) && !isSubsequenceOfFrames(got, sent, 1280) {
		t.Fatalf("the audio that passed is not frames of what was sent, in order")
	}
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" || ev["retryable"] != true {
		t.Fatalf("after audio over its pace: %v, want error rate_limited", ev)
	}
	if n := g.refusals("audio_rate"); n != float64((len(sent)-len(got))/1280) {
		t.Fatalf("refusals{audio_rate} = %v, want one per dropped frame (%d)", n, (len(sent)-len(got))/1280)
	}
}

// isSubsequenceOfFrames reports whether got is whole frames of sent, in
// order.
func isSubsequenceOfFrames(got, sent []byte, frame int) bool {
	for len(got) > 0 && len(sent) >= frame {
		if bytes.Equal(got[:frame], sent[:frame]) {
			got = got[frame:]
		}
		sent = sent[frame:]
	}
	return len(got) == 0
}

func TestTurnsPerMinuteHoldForAUserAcrossGateways(t *testing.T) {
	addr := redistest.Start(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.TurnsPerMinute = 2
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")
	// A's second step answers the refused turn's request if it got there
	// before its cancel (below); bob is answered on B.
	brainA := fakegemini.NewScript(textStep("one"), textStep("never shown"))
	brainB := fakegemini.NewScript(textStep("two"), textStep("hi bob"))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	onA := a.dial("", alice)
	ready := onA.start(nil)
	onA.ask("first")
	onB := b.dial("", alice)
	onB.start(nil)
	onB.ask("second, on the other gateway")

	// The third within the minute is refused wherever it comes from, and
	// never reaches a model or the history.
	onA.send(map[string]any{"type": "text", "text": "third"})
	ev := onA.next()
	if ev.typ() != "error" || ev.str("code") != "rate_limited" || ev["retryable"] != true ||
		!strings.Contains(ev.str("message"), "try again in") {
		t.Fatalf("third turn in a minute: %v, want error rate_limited", ev)
	}
	// Asked again at once, it is refused without a store round trip, the
	// same way.
	onA.send(map[string]any{"type": "text", "text": "third, again"})
	if ev := onA.next(); ev.str("code") != "rate_limited" {
		t.Fatalf("again: %v", ev)
	}
	onA.send(map[string]any{"type": "ping"})
	if ev := onA.next(); ev.typ() != "pong" {
		t.Fatalf("the session after refused turns: %v", ev)
	}
	// The third turn's request was built alongside the store's check (the
	// text path does not wait for Redis before building it) but held for
	// the verdict before it was sent, and the refused turns after it asked
	// Redis (or the local window) first: the models answered only the two
	// admitted turns, and no request was started and cancelled.
	cancelled := a.cancelledModelRequests()
	if n := len(brainA.Requests()) + len(brainB.Requests()); cancelled != 0 || n != 2 {
		t.Fatalf("the models were called %d times with %v cancelled, want the two admitted turns and none "+
			"cancelled", n, cancelled)
	}
	if g := a.refusals("turns_per_minute"); g != 2 {
		t.Fatalf("refusals{turns_per_minute} = %v, want 2", g)
	}
	st := store.NewRedisStore(redisClientFor(t, cfg), store.RedisStoreOptions{})
	testwait.For(t, "the refused turn to leave the stored history", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		rec, hist, err := st.Load(ctx, ready.str("sessionId"))
		return err == nil && rec.Turn == 1 && len(hist) == 2
	})

	// Another user is not affected.
	bc := b.dial("", bob)
	bc.start(nil)
	if evs := bc.ask("hello"); last(evs).str("reason") != "end_turn" || !strings.Contains(fmt.Sprint(evs), "hi bob") {
		t.Fatalf("bob: %v", evs)
	}
}

// TestNewSessionsPerMinuteHoldForAUserAcrossGateways: one user cannot
// create sessions in a loop (each is kept in Redis for the session TTL),
// wherever they connect; resumes and other users are not affected.
func TestNewSessionsPerMinuteHoldForAUserAcrossGateways(t *testing.T) {
	addr := redistest.Start(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.NewSessionsPerMinute = 2
	// Without the abuse cooldown the 4008 starts (TestTooManyNewSessionsRefused4008CoolsTheUserDownOnBothNodes),
	// which would refuse the resume below too.
	cfg.AbuseCooldown = store.CooldownPolicy{}
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")
	a := startGateway(t, cfg, fakegemini.NewScript())
	b := startGateway(t, cfg, fakegemini.NewScript())

	first := a.dial("", alice)
	ready := first.start(nil)
	first.c.CloseNow()
	b.dial("", alice).start(nil)

	// The third new session within the minute is refused, on either node.
	third := a.dial("", alice)
	third.send(map[string]any{"type": "session.start"})
	ev := third.next()
	if ev.typ() != "error" || ev.str("code") != "rate_limited" || ev["retryable"] != true ||
		!strings.Contains(ev.str("message"), "try again in") {
		t.Fatalf("third new session in a minute: %v, want error rate_limited", ev)
	}
	if code := third.expectClose(); code != 4008 {
		t.Fatalf("third new session closed with %d, want 4008", code)
	}
	if g := a.refusals("new_sessions_per_minute"); g != 1 {
		t.Fatalf("refusals{new_sessions_per_minute} = %v, want 1", g)
	}
	if g := a.sessionsRefused("new_sessions_per_minute"); g != 1 {
		t.Fatalf("sessions_refused{new_sessions_per_minute} = %v, want 1", g)
	}
	n, err := redis.NewClient(&redis.Options{Addr: addr}).Keys(context.Background(), "turnstile:{*}:meta").Result()
	if err != nil || len(n) != 2 {
		t.Fatalf("session records in Redis: %v (%v), want the 2 allowed", n, err)
	}

	// A resume is not a new session; another user has a window of their own.
	back := a.dial("", alice)
	if ev := back.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"),
		"resumeToken": ready.str("resumeToken")}}); ev["resumed"] != true {
		t.Fatalf("resume after the refusal: %v", ev)
	}
	b.dial("", bob).start(nil)
}

func TestInDevModeEachConnectionHasItsOwnTurnsPerMinute(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.TurnsPerMinute = 1
	g := startGateway(t, cfg, fakegemini.NewScript(textStep("a"), textStep("b")))
	for i := range 2 {
		c := g.dial("", nil)
		c.start(nil)
		if evs := c.ask("hello"); last(evs).str("reason") != "end_turn" {
			t.Fatalf("anonymous connection %d: %v", i, evs)
		}
		if i == 1 {
			c.send(map[string]any{"type": "text", "text": "and again"})
			if ev := c.next(); ev.str("code") != "rate_limited" {
				t.Fatalf("second turn of one anonymous connection: %v, want rate_limited", ev)
			}
		}
	}
}

func TestVoiceStartsPerMinuteCountEveryMoveIntoVoice(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.VoiceStartsPerMinute = 2
	g, script := startVoiceGateway(t, cfg, nil)
	c, ready, u := startInVoice(t, g, script) // session.start in voice: the first
	toText := func() {
		t.Helper()
		c.send(map[string]any{"type": "voice.stop"})
		for ev := c.next(); ev.typ() != "mode"; ev = c.next() {
		}
	}
	toText()
	<-u.ended
	c.send(map[string]any{"type": "voice.start"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("second move into voice: %v", ev)
	}
	u = nextUpstream(t, script)
	toText()
	<-u.ended
	c.send(map[string]any{"type": "voice.start"})
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" || ev["retryable"] != true ||
		!tryAgainIn.MatchString(ev.str("message")) {
		t.Fatalf("third move into voice in a minute: %v, want error rate_limited saying when to try again", ev)
	}
	noUpstream(t, script)
	c.send(map[string]any{"type": "ping"})
	if ev := c.next(); ev.typ() != "pong" {
		t.Fatalf("the session stays in text: %v", ev)
	}
	if n := g.refusals("voice_starts_per_minute"); n != 1 {
		t.Fatalf("refusals{voice_starts_per_minute} = %v, want 1", n)
	}

	// The window is the session's: reconnecting and resuming does not
	// reset it.
	_ = c.c.CloseNow()
	back := g.dial("", nil)
	back.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"),
		"resumeToken": ready.str("resumeToken")}})
	back.send(map[string]any{"type": "voice.start"})
	if ev := back.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" {
		t.Fatalf("voice.start after a resume, within the minute: %v, want error rate_limited", ev)
	}
	noUpstream(t, script)
}

func TestContextBoundStopsTheModelRequestGrowing(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.ContextMaxTokens = 4000
	cfg.TurnsPerMinute = 0
	brain := fakegemini.NewScript()
	for range 12 {
		brain.Push(textStep("noted"))
	}
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	for i := range 12 {
		msg := strings.Repeat(string(rune('a'+i)), 4000)
		if evs := c.ask(msg); last(evs).str("reason") != "end_turn" {
			t.Fatalf("turn %d: %v", i+1, last(evs))
		}
	}
	reqs := brain.Requests()
	sizes := make([]int, len(reqs))
	for i, r := range reqs {
		sizes[i] = requestChars(r)
		// The current message is always there, last.
		if want := strings.Repeat(string(rune('a'+i)), 4000); lastUserText(r) != want {
			t.Fatalf("request %d does not end with its own message", i+1)
		}
	}
	// Whole request (system, declarations, history) within the bound,
	// estimated as the gateway does (characters/4), with room for the
	// JSON around each entry.
	bound := cfg.ContextMaxTokens * 4
	for i, n := range sizes {
		if n > bound {
			t.Fatalf("request %d is %d characters, over the bound of %d: sizes %v", i+1, n, bound, sizes)
		}
	}
	t.Logf("request sizes %v", sizes)
	if sizes[1] <= sizes[0] || sizes[11] > sizes[2] {
		t.Fatalf("request sizes %v: they should grow, then stop growing", sizes)
	}
	if g.refusals("context_trimmed") == 0 {
		t.Fatal("no context_trimmed refusal counted")
	}
}

// requestChars is the size of a model request as the model sees it:
// system instruction, tool declarations (as JSON) and every content part.
func requestChars(r *fakegemini.Request) int {
	n := len(systemText(r)) + len(mustMarshal(r.Tools))
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			n += len(p.Text)
			if p.FunctionCall != nil {
				n += len(mustMarshal(p.FunctionCall))
			}
			if p.FunctionResponse != nil {
				n += len(mustMarshal(p.FunctionResponse))
			}
		}
	}
	return n
}

func TestHistoryMaxBytesBoundsTheStoredHistory(t *testing.T) {
	addr := redistest.Start(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.HistoryMaxBytes = 16 << 10
	cfg.TurnsPerMinute = 0
	brain := fakegemini.NewScript()
	for range 8 {
		brain.Push(textStep("noted"))
	}
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	ready := c.start(nil)
	for i := range 8 {
		c.ask(strings.Repeat(string(rune('a'+i)), 4000))
	}
	st := store.NewRedisStore(redisClientFor(t, cfg), store.RedisStoreOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, hist, err := st.Load(ctx, ready.str("sessionId"))
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, e := range hist {
		size += len(mustMarshal(e))
	}
	if size > cfg.HistoryMaxBytes || len(hist) < 2 || hist[len(hist)-1].Text != "noted" ||
		hist[len(hist)-2].Text != strings.Repeat("h", 4000) {
		t.Fatalf("stored history: %d entries, %d bytes; want the newest within %d bytes", len(hist), size, cfg.HistoryMaxBytes)
	}
	if g.refusals("history_bytes") == 0 {
		t.Fatal("no history_bytes refusal counted")
	}
}

func TestInvalidUTF8InATextFrameCloses1007(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript())
	for _, started := range []bool{false, true} {
		c := g.dial("", nil)
		if started {
			c.start(nil)
		}
		c.sendRaw([]byte("{\"type\":\"text\",\"text\":\"caf\xe9\"}"))
		if code := c.expectClose(); code != websocket.StatusInvalidFramePayloadData {
			t.Fatalf("invalid UTF-8 (session started: %v) closed %d, want 1007", started, code)
		}
	}
	if n := g.refusals("invalid_utf8"); n != 2 {
		t.Fatalf("refusals{invalid_utf8} = %v, want 2", n)
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestContextBoundAppliesToTheHistoryThatSeedsVoice(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.ContextMaxTokens = 4000
	text := fakegemini.NewScript()
	for range 6 {
		text.Push(textStep("noted"))
	}
	g, script := startVoiceGateway(t, cfg, text)
	c := g.dial("", nil)
	c.start(nil)
	for i := range 6 {
		c.ask(strings.Repeat(string(rune('a'+i)), 4000))
	}
	c.send(map[string]any{"type": "voice.start"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after voice.start: %v", ev)
	}
	u := nextUpstream(t, script)
	testwait.For(t, "the seed upstream", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	seed := contentTexts(u.ofKind(fakegemini.EventClientContent)[0])
	size := 0
	for _, s := range seed {
		size += len(s)
	}
	lastMsg := "user:" + strings.Repeat("f", 4000)
	if size > cfg.ContextMaxTokens*4 || len(seed) < 2 || seed[len(seed)-2] != lastMsg || seed[0] == "user:"+strings.Repeat("a", 4000) {
		t.Fatalf("voice seeded with %d entries (%d characters); want the newest turns within the bound", len(seed), size)
	}
}
