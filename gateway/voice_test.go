package gateway_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// End-to-end tests of voice sessions: a browser speaking protocol v1, the
// real gateway, the real genai Live client, and a fake Live model played
// by the test.

func TestVoiceAudioPassesThroughUnchangedAndInOrder(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, _, u := startInVoice(t, g, script)

	// Microphone → model: 40 frames of 40 ms, then the microphone pauses.
	var sent []byte
	for i := range 40 {
		chunk := pcm(i, 1280)
		sent = append(sent, chunk...)
		if err := c.sendAudio(chunk); err != nil {
			t.Fatal(err)
		}
	}
	c.send(map[string]any{"type": "audio.end"})
	testwait.For(t, "the microphone audio upstream", func() bool { return len(u.ofKind(fakegemini.EventAudioStreamEnd)) == 1 })
	if got := u.audio(); !bytes.Equal(got, sent) {
		t.Fatalf("model received %d bytes of audio that differ from the %d the browser sent", len(got), len(sent))
	}
	for _, ev := range u.ofKind(fakegemini.EventAudio) {
		if ev.MIMEType != "audio/pcm;rate=16000" {
			t.Fatalf("audio sent upstream as %q", ev.MIMEType)
		}
	}
	evs := u.received()
	if last := evs[len(evs)-1]; last.Kind != fakegemini.EventAudioStreamEnd {
		t.Fatalf("audioStreamEnd arrived before the audio ended: last event %v", last.Kind)
	}

	// Model → browser: chunks of uneven sizes, each its own binary frame.
	var spoken [][]byte
	for i, n := range []int{4800, 2, 960, 9600, 480, 4800, 1920} {
		chunk := pcm(100+i, n)
		spoken = append(spoken, chunk)
		must(t, u.SendAudio(chunk))
	}
	must(t, u.SendTurnComplete(nil))
	fs := c.recvUntil("turn.done")
	var heard [][]byte
	for _, f := range fs {
		if f.ev == nil {
			heard = append(heard, f.audio)
		}
	}
	if !bytes.Equal(bytes.Join(heard, nil), bytes.Join(spoken, nil)) || len(heard) != len(spoken) {
		t.Fatalf("browser heard %d frames (%d bytes), the model spoke %d (%d bytes)",
			len(heard), len(bytes.Join(heard, nil)), len(spoken), len(bytes.Join(spoken, nil)))
	}
	if end := last(events(fs)); end.str("reason") != "end_turn" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v", end)
	}
}

func TestVoiceTranscriptsCarryTurnNumbersAndJoinTheHistory(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, ready, u := startInVoice(t, g, script)

	exchange := func(turn int, in, out []string) {
		t.Helper()
		for _, s := range in {
			must(t, u.SendInputTranscript(s))
		}
		for _, s := range out {
			must(t, u.SendOutputTranscript(s))
		}
		must(t, u.SendAudio(pcm(turn, 960)))
		must(t, u.SendTurnComplete(nil))
		evs := events(c.recvUntil("turn.done"))
		var gotIn, gotOut []string
		for _, ev := range evs {
			if ev["turn"] != float64(turn) {
				t.Fatalf("event %v of turn %d carries another turn", ev, turn)
			}
			switch ev.typ() {
			case "transcript.input":
				gotIn = append(gotIn, ev.str("text"))
			case "transcript.output":
				gotOut = append(gotOut, ev.str("text"))
			}
		}
		if evs[0].typ() != "turn.start" {
			t.Fatalf("turn %d starts with %v", turn, evs[0])
		}
		if strings.Join(gotIn, "|") != strings.Join(in, "|") || strings.Join(gotOut, "|") != strings.Join(out, "|") {
			t.Fatalf("turn %d transcripts: in %q out %q", turn, gotIn, gotOut)
		}
		if end := last(evs); end.str("reason") != "end_turn" {
			t.Fatalf("turn %d ended with %v", turn, end)
		}
	}
	exchange(1, []string{"What are your ", "opening hours?"}, []string{"We open ", "at nine."})
	exchange(2, []string{"And on Sundays?"}, []string{"Closed on Sundays."})

	// The browser drops; on resume the history holds both voice turns, and
	// the new upstream is seeded with them.
	_ = c.c.CloseNow()
	u.waitEnded()
	c2 := g.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	var hist []string
	for _, h := range again["history"].([]any) {
		item := h.(map[string]any)
		hist = append(hist, item["role"].(string)+":"+item["text"].(string))
	}
	want := "user:What are your opening hours?|model:We open at nine.|user:And on Sundays?|model:Closed on Sundays."
	if got := strings.Join(hist, "|"); got != want || again["turn"] != float64(2) {
		t.Fatalf("history on resume = %q (turn %v), want %q", got, again["turn"], want)
	}
	if ev := c2.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after resuming a voice session: %v, want mode voice", ev)
	}
	u2 := nextUpstream(t, script)
	testwait.For(t, "the history seeding the new upstream", func() bool {
		return len(u2.ofKind(fakegemini.EventClientContent)) == 1
	})
	seed := u2.ofKind(fakegemini.EventClientContent)[0]
	if got := strings.Join(contentTexts(seed), "|"); got != want || seed.TurnComplete {
		t.Fatalf("new upstream seeded with %q (turnComplete %v), want %q", got, seed.TurnComplete, want)
	}
}

func TestBargeInFlushesTheAnswerAndTheNextAnswerIsHeard(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, _, u := startInVoice(t, g, script)

	must(t, u.SendOutputTranscript("Our opening hours are"))
	must(t, u.SendAudio(pcm(1, 4800)))
	must(t, u.SendAudio(pcm(2, 4800)))
	if audio, _ := c.recvAudio(9600); len(audio) != 9600 {
		t.Fatalf("heard %d bytes before the barge-in", len(audio))
	}
	must(t, u.SendInterrupted())
	must(t, u.SendAudio(pcm(3, 4800))) // already in flight when the user spoke
	must(t, u.SendTurnComplete(nil))
	fs := c.recvUntil("turn.done")
	interrupted := -1
	for i, f := range fs {
		switch {
		case f.ev != nil && f.ev.typ() == "audio.interrupted":
			if f.ev["turn"] != float64(1) {
				t.Fatalf("audio.interrupted = %v", f.ev)
			}
			interrupted = i
		case f.ev == nil && interrupted >= 0:
			t.Fatalf("%d bytes of the interrupted answer played after audio.interrupted", len(f.audio))
		}
	}
	if interrupted < 0 {
		t.Fatalf("no audio.interrupted: %v", events(fs))
	}
	if end := last(events(fs)); end.str("reason") != "interrupted" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v, want interrupted", end)
	}

	// The next answer is heard in full.
	must(t, u.SendAudio(pcm(4, 4800)))
	must(t, u.SendTurnComplete(nil))
	fs = c.recvUntil("turn.done")
	if !bytes.Equal(audioOf(fs), pcm(4, 4800)) {
		t.Fatalf("next answer: heard %d bytes, want 4800", len(audioOf(fs)))
	}
	if end := last(events(fs)); end.str("reason") != "end_turn" || end["turn"] != float64(2) {
		t.Fatalf("next turn.done = %v", end)
	}
}

// stalledCallGateway starts a voice gateway whose kb_search needs a
// confirmation, which is looked up in Redis behind a proxy the test can
// stall: a kb_search call then stays pending for as long as the test
// wants.
func stalledCallGateway(t *testing.T) (*testGateway, *fakegemini.LiveScript, *stallProxy) {
	t.Helper()
	mr := miniredis.RunT(t)
	proxy := startStallProxy(t, mr.Addr())
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + proxy.addr())
	cfg.RedisTimeout = 5 * time.Second
	cfg = withPolicy(t, cfg, "tools:\n  kb_search:\n    requiresConfirmation: true\n")
	g, script := startVoiceGateway(t, cfg, nil)
	return g, script, proxy
}

// withdrawnCallIsNeverAnswered checks that nothing was answered for id,
// after a later call of the session (later) has been answered.
func withdrawnCallIsNeverAnswered(t *testing.T, u *upstream, id, later string) {
	t.Helper()
	testwait.For(t, "the later call's answer", func() bool {
		for _, r := range u.responses() {
			if r.ID == later {
				return true
			}
		}
		return false
	})
	for _, r := range u.responses() {
		if r.ID == id {
			t.Fatalf("the withdrawn call %s was answered upstream: %v", id, r.Response)
		}
	}
}

func TestBargeInCancelsTheTurnsPendingToolCall(t *testing.T) {
	g, script, proxy := stalledCallGateway(t)
	c, _, u := startInVoice(t, g, script)

	must(t, u.SendAudio(pcm(1, 4800)))
	c.recvAudio(4800) // the voice side is up and idle on Redis
	proxy.pause()
	ids, err := u.SendToolCall(searchCall("opening hours"))
	must(t, err)
	if ev := c.until("tool.call"); last(ev).str("id") != ids[0] {
		t.Fatalf("tool.call = %v", last(ev))
	}
	must(t, u.SendInterrupted())
	evs := c.until("audio.interrupted")
	proxy.resume()
	evs = append(evs, untilResult(c, ids[0])...)
	must(t, u.SendTurnComplete(nil))
	evs = append(evs, c.until("turn.done")...)
	if end := last(evs); end.str("reason") != "interrupted" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v, want interrupted", end)
	}

	// The next turn's call is answered; the withdrawn one never is.
	later, err := u.SendToolCall(getCall("shipping"))
	must(t, err)
	withdrawnCallIsNeverAnswered(t, u, ids[0], later[0])
	noConfirmationAsked(t, evs)
}

// untilResult reads events up to the tool.result of call id.
func untilResult(c *wsClient, id string) []event {
	c.t.Helper()
	var evs []event
	for {
		ev := c.next()
		evs = append(evs, ev)
		if ev.typ() == "tool.result" && ev.str("id") == id {
			return evs
		}
	}
}

// noConfirmationAsked checks that the user was not asked to approve a call
// the model had withdrawn.
func noConfirmationAsked(t *testing.T, evs []event) {
	t.Helper()
	for _, ev := range ofType(evs, "confirm.request") {
		t.Errorf("the user is asked to approve a withdrawn call: %v", ev)
	}
}

func TestToolCallCancellationWithdrawsTheAnswer(t *testing.T) {
	g, script, proxy := stalledCallGateway(t)
	c, _, u := startInVoice(t, g, script)

	must(t, u.SendOutputTranscript("Let me look."))
	c.until("transcript.output") // the voice side is up and idle on Redis
	proxy.pause()
	ids, err := u.SendToolCall(searchCall("opening hours"))
	must(t, err)
	evs := c.until("tool.call")
	must(t, u.SendToolCallCancellation(ids[0]))
	// Events of one upstream are handled in order: once this transcript has
	// reached the browser, the cancellation has been applied.
	must(t, u.SendOutputTranscript("Never mind."))
	evs = append(evs, c.until("transcript.output")...)
	proxy.resume()
	evs = append(evs, untilResult(c, ids[0])...)

	later, err := u.SendToolCall(getCall("shipping"))
	must(t, err)
	withdrawnCallIsNeverAnswered(t, u, ids[0], later[0])
	must(t, u.SendTurnComplete(nil))
	evs = append(evs, c.until("turn.done")...)
	if end := last(evs); end.str("reason") != "end_turn" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v", end)
	}
	if r := resultsByID(evs)[later[0]]; r["ok"] != true {
		t.Fatalf("the later call: %v", r)
	}
	noConfirmationAsked(t, evs)
}

func TestVoiceGatesRefuseCallsOverTheTurnsBudget(t *testing.T) {
	cases := []struct {
		name             string
		retrieval, total int // 0: the defaults (2 retrieval, 3 total)
		calls            []fakegemini.Call
		gate, message    string
	}{
		{name: "retrieval", calls: []fakegemini.Call{searchCall("hours"), searchCall("shipping"), searchCall("returns")},
			gate: "retrieval", message: "2 retrieval calls"},
		{name: "total", retrieval: 10, total: 3,
			calls: []fakegemini.Call{searchCall("hours"), getCall("shipping"), searchCall("returns"), getCall("returns-and-refunds")},
			gate:  "total", message: "3 tool calls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultTestConfig(t)
			if tc.total > 0 {
				cfg.Voice.MaxRetrieval, cfg.Voice.MaxCalls = tc.retrieval, tc.total
			}
			g, script := startVoiceGateway(t, cfg, nil)
			c, _, u := startInVoice(t, g, script)
			n := len(tc.calls)

			ids, err := u.SendToolCall(tc.calls...) // parallel calls, one toolCall
			must(t, err)
			resp := u.waitResponses(n)
			if len(resp) != n || len(u.ofKind(fakegemini.EventToolResponse)) != 1 {
				t.Fatalf("model got %d responses in %d messages, want %d in one",
					len(resp), len(u.ofKind(fakegemini.EventToolResponse)), n)
			}
			byID := map[string]int{}
			for i, id := range ids {
				byID[id] = i
			}
			seen := map[string]bool{}
			for _, r := range resp {
				i, ok := byID[r.ID]
				if !ok || seen[r.ID] || r.Name != tc.calls[i].Name {
					t.Fatalf("response %s (%s) does not pair with one call of %v", r.ID, r.Name, ids)
				}
				seen[r.ID] = true
				typ, msg := responseError(r)
				switch {
				case i < n-1 && typ != "":
					t.Fatalf("call %d within the budget answered %s %q", i, typ, msg)
				case i == n-1 && (typ != "BUDGET_EXCEEDED" || !strings.Contains(msg, tc.message)):
					t.Fatalf("call over the budget answered %s %q", typ, msg)
				}
			}

			must(t, u.SendTurnComplete(nil))
			evs := c.until("turn.done")
			results := resultsByID(evs)
			for i, id := range ids {
				if r := results[id]; i < n-1 && r["ok"] != true || i == n-1 && !refusedWith(r, "BUDGET_EXCEEDED") {
					t.Fatalf("tool.result of call %d: %v", i, r)
				}
			}
			if len(ofType(evs, "tool.call")) != n {
				t.Fatalf("%d tool.call events, want %d", len(ofType(evs, "tool.call")), n)
			}
			_, body := get(t, g.adminURL+"/metrics")
			if want := `turnstile_gate_refusals_total{gate="` + tc.gate + `",mode="voice"} 1`; !strings.Contains(body, want) {
				t.Fatalf("/metrics lacks %q", want)
			}
		})
	}
}

func TestEndVoiceSessionPlaysTheGoodbyeThenReturnsToText(t *testing.T) {
	text := fakegemini.NewScript(textStep("Back in text."))
	g, script := startVoiceGateway(t, defaultTestConfig(t), text)
	c, _, u := startInVoice(t, g, script)

	must(t, u.SendInputTranscript("That's all, bye."))
	ids, err := u.SendToolCall(fakegemini.Call{Name: "end_voice_session", Args: map[string]any{"reason": "the user said goodbye"}})
	must(t, err)
	if resp := u.waitResponses(1); resp[0].ID != ids[0] || resp[0].Response["error"] != nil {
		t.Fatalf("end_voice_session answered %v", resp[0].Response)
	}
	// The goodbye: a barge-in in the middle must not cut it.
	var goodbye []byte
	must(t, u.SendOutputTranscript("Goodbye!"))
	for i := range 6 {
		if i == 3 {
			must(t, u.SendInterrupted())
		}
		chunk := pcm(10+i, 4800)
		goodbye = append(goodbye, chunk...)
		must(t, u.SendAudio(chunk))
	}
	must(t, u.SendTurnComplete(nil))

	fs := c.recvUntil("mode")
	evs := events(fs)
	if !bytes.Equal(audioOf(fs), goodbye) {
		t.Fatalf("heard %d bytes of the goodbye, want all %d", len(audioOf(fs)), len(goodbye))
	}
	if len(ofType(evs, "audio.interrupted")) != 0 {
		t.Fatalf("the goodbye was interrupted: %v", evs)
	}
	done := ofType(evs, "turn.done")
	if len(done) != 1 || done[0].str("reason") != "end_turn" {
		t.Fatalf("turn.done = %v", done)
	}
	if m := last(evs); m.str("mode") != "text" || m.str("reason") != "end_voice_session" {
		t.Fatalf("mode = %v", m)
	}
	u.waitEnded()

	// The next message is a text turn.
	tevs := c.ask("one more question")
	if len(text.Requests()) != 1 || last(tevs).str("reason") != "end_turn" || last(tevs)["turn"] != float64(2) {
		t.Fatalf("text turn after voice: %v", tevs)
	}
	if d := ofType(tevs, "text.done"); len(d) != 1 || d[0].str("text") != "Back in text." {
		t.Fatalf("text.done = %v", d)
	}
	noUpstream(t, script)
}

func TestSlowBrowserInVoiceIsDisconnectedAndTheUpstreamClosed(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.SendQueueBytes = 64 << 10
	cfg.WriteTimeout = 200 * time.Millisecond
	tooSlow, writeFailed := streamToABrowserThatStopsReading(t, cfg, false)
	if tooSlow+writeFailed != 1 {
		t.Fatalf("disconnect not counted as too_slow or write_failed")
	}
}

// A browser that stops reading while model audio streams is closed as too
// slow (4101: reconnect and resume), not as a failed write, also when the
// voice pump writes the audio itself rather than queueing it: its write
// waits as long as the send queue's bound holds of model audio (64 KiB:
// 1.4 s), well within the write timeout, then the browser is closed.
func TestBrowserThatStopsReadingWhileModelAudioStreamsIsClosedTooSlow(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.SendQueueBytes = 64 << 10
	cfg.WriteTimeout = time.Minute
	if tooSlow, writeFailed := streamToABrowserThatStopsReading(t, cfg, false); tooSlow != 1 || writeFailed != 0 {
		t.Fatalf("disconnects counted: too_slow %v, write_failed %v; want one too_slow", tooSlow, writeFailed)
	}
}

// streamToABrowserThatStopsReading streams model audio to a browser in
// voice that never reads, until the gateway has dropped it and closed its
// upstream; it returns the disconnects counted as too_slow and as
// write_failed. With mic the browser first sends a microphone frame (its
// socket joins an event loop then, TURNSTILE_VOICE_LOOP).
func streamToABrowserThatStopsReading(t *testing.T, cfg gateway.Config, mic bool) (tooSlow, writeFailed float64) {
	t.Helper()
	g, script := startVoiceGateway(t, cfg, nil)
	c, _, u := startInVoice(t, g, script)
	if mic {
		must(t, c.sendAudio(pcm(0, 640)))
		testwait.For(t, "the microphone audio upstream", func() bool { return len(u.audio()) > 0 })
	}
	// it never reads again

	chunk := pcm(0, 9600) // 200 ms of 24 kHz audio
	sent := 0
	for u.SendAudio(chunk) == nil {
		if sent += len(chunk); sent > 256<<20 {
			t.Fatal("the gateway kept taking audio for a browser that reads nothing")
		}
	}
	u.waitEnded()
	testwait.For(t, "the slow connection to be dropped", func() bool { return g.gw.sessions.Active() == 0 })
	m := g.gw.sessions.Metrics.BrowserDisconnect
	return testutil.ToFloat64(m.WithLabelValues("too_slow")), testutil.ToFloat64(m.WithLabelValues("write_failed"))
}

func TestModeSwitchesBothWaysCarryTheConversation(t *testing.T) {
	text := fakegemini.NewScript(textStep("Beans ship in two days."), textStep("You're welcome."))
	g, script := startVoiceGateway(t, defaultTestConfig(t), text)
	c := g.dial("", nil)
	c.start(nil)
	c.ask("How fast do you ship?")

	c.send(map[string]any{"type": "voice.start"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" || ev.str("reason") != "client" {
		t.Fatalf("after voice.start: %v", ev)
	}
	u := nextUpstream(t, script)
	testwait.For(t, "the text history upstream", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	seed := u.ofKind(fakegemini.EventClientContent)[0]
	if got := strings.Join(contentTexts(seed), "|"); got != "user:How fast do you ship?|model:Beans ship in two days." || seed.TurnComplete {
		t.Fatalf("voice seeded with %q (turnComplete %v)", got, seed.TurnComplete)
	}

	must(t, u.SendInputTranscript("And to Canada?"))
	must(t, u.SendOutputTranscript("Canada takes a week."))
	must(t, u.SendAudio(pcm(1, 4800)))
	must(t, u.SendTurnComplete(nil))
	if end := last(events(c.recvUntil("turn.done"))); end.str("reason") != "end_turn" || end["turn"] != float64(2) {
		t.Fatalf("voice turn.done = %v", end)
	}

	c.send(map[string]any{"type": "voice.stop"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "text" || ev.str("reason") != "client" {
		t.Fatalf("after voice.stop: %v", ev)
	}
	u.waitEnded()

	if end := last(c.ask("Thanks!")); end["turn"] != float64(3) {
		t.Fatalf("text turn after voice: %v", end)
	}
	var said []string
	for _, ct := range text.Requests()[1].Contents {
		for _, p := range ct.Parts {
			said = append(said, ct.Role+":"+p.Text)
		}
	}
	want := "user:How fast do you ship?|model:Beans ship in two days.|user:And to Canada?|model:Canada takes a week.|user:Thanks!"
	if got := strings.Join(said, "|"); got != want {
		t.Fatalf("text model saw %q, want %q", got, want)
	}
}

func TestStartVoiceSessionToolSwitchesAfterTheTurn(t *testing.T) {
	text := fakegemini.NewScript(callStep(fakegemini.Call{Name: "start_voice_session"}), textStep("Let's talk."))
	g, script := startVoiceGateway(t, defaultTestConfig(t), text)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("can we talk instead?")
	if r := ofType(evs, "tool.result"); len(r) != 1 || r[0]["ok"] != true {
		t.Fatalf("start_voice_session: %v", r)
	}
	if len(ofType(evs, "mode")) != 0 {
		t.Fatalf("mode changed before the turn ended: %v", evs)
	}
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" || ev.str("reason") != "start_voice_session" {
		t.Fatalf("after the turn: %v, want mode voice", ev)
	}
	u := nextUpstream(t, script)
	var declared []string
	for _, d := range u.Setup.FunctionDeclarations() {
		declared = append(declared, d.Name)
	}
	if got := strings.Join(declared, ","); !strings.Contains(got, "end_voice_session") || strings.Contains(got, "start_voice_session") {
		t.Fatalf("tools declared in voice: %s", got)
	}
	// The voice session works: microphone audio reaches the model.
	if err := c.sendAudio(pcm(1, 1280)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "microphone audio upstream", func() bool { return len(u.audio()) == 1280 })
}

func TestSlowRedisDoesNotHoldUpTheVoiceConversation(t *testing.T) {
	mr := miniredis.RunT(t)
	proxy := startStallProxy(t, mr.Addr())
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + proxy.addr())
	cfg.RedisTimeout = 3 * time.Second // a store call may take up to 6 s
	g, script := startVoiceGateway(t, cfg, nil)
	c, _, u := startInVoice(t, g, script)
	must(t, u.SendAudio(pcm(1, 960)))
	c.recvAudio(960) // the voice side is up and idle on Redis

	proxy.pause()
	defer proxy.resume()
	start := time.Now()
	must(t, u.SendOutputTranscript("Here you are."))
	must(t, u.SendTurnComplete(nil))   // the turn's transcripts go to the store
	must(t, u.SendAudio(pcm(2, 4800))) // the next answer starts at once
	c.recvAudio(4800)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the next answer's audio waited %v for Redis", d.Round(time.Millisecond))
	}
}
