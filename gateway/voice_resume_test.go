package gateway_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// End-to-end tests of voice surviving the loss of a connection: the Live
// upstream going away or failing, and the browser reconnecting to another
// gateway.

// noticed fails when the browser was told anything about the upstream
// being replaced: an error or a mode change.
func noticed(t *testing.T, evs []event) {
	t.Helper()
	for _, ev := range evs {
		if ev.typ() == "error" || ev.typ() == "mode" {
			t.Fatalf("the browser noticed the upstream switch: %v", ev)
		}
	}
}

func TestGoAwayResumesTheUpstreamWithoutLosingMicrophoneAudio(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, _, u1 := startInVoice(t, g, script)
	handle, err := u1.SendResumptionUpdate(true)
	must(t, err)

	// The user keeps talking, in 20 ms frames, across the switch.
	const frames = 300
	var sent []byte
	for i := range frames {
		sent = append(sent, pcm(i, 640)...)
	}
	micDone := make(chan error, 1)
	go func() {
		for i := range frames {
			if err := c.sendAudio(sent[i*640 : (i+1)*640]); err != nil {
				micDone <- err
				return
			}
			time.Sleep(time.Millisecond) // pacing only; a real microphone is slower still
		}
		micDone <- nil
	}()
	testwait.For(t, "audio on the first upstream", func() bool { return len(u1.audio()) > 0 })
	must(t, u1.SendGoAway(30*time.Second))

	u2 := nextUpstream(t, script)
	if u2.Setup.ResumeHandle() != handle || !u2.Resumed {
		t.Fatalf("new upstream set up with handle %q (resumed %v), want the latest %q",
			u2.Setup.ResumeHandle(), u2.Resumed, handle)
	}
	u1.waitEnded()
	select {
	case err := <-micDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the browser could not send its audio")
	}
	total := func() int { return len(u1.audio()) + len(u2.audio()) }
	testwait.ForNil(t, "the browser's audio at the upstreams", func() error {
		if total() < len(sent) {
			return fmt.Errorf("%d of %d bytes arrived", total(), len(sent))
		}
		return nil
	})
	if got := append(u1.audio(), u2.audio()...); !bytes.Equal(got, sent) {
		t.Fatalf("upstreams received %d bytes (%d before the switch, %d after), the browser sent %d",
			len(got), len(u1.audio()), len(u2.audio()), len(sent))
	}
	if len(u2.ofKind(fakegemini.EventClientContent)) != 0 {
		t.Fatal("a resumed upstream was seeded with the history again")
	}

	// The conversation goes on over the new upstream, unnoticed.
	must(t, u2.SendOutputTranscript("Still here."))
	must(t, u2.SendTurnComplete(nil))
	evs := c.until("turn.done")
	noticed(t, evs)
	if end := last(evs); end.str("reason") != "end_turn" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v", end)
	}
	noUpstream(t, script)
}

func TestUpstream1011MidTurnIsReportedAndVoiceGoesOn(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, _, u1 := startInVoice(t, g, script)
	handle, err := u1.SendResumptionUpdate(true)
	must(t, err)

	must(t, u1.SendInputTranscript("What's the weather like"))
	must(t, u1.SendAudio(pcm(1, 4800)))
	c.recvAudio(4800)
	must(t, u1.Close(1011, "Internal error occurred."))

	evs := c.until("turn.done")
	errs := ofType(evs, "error")
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want one", errs)
	}
	if e := errs[0]; e.str("code") != "upstream_closed" || e["retryable"] != true || e["turn"] != float64(1) ||
		!strings.Contains(e.str("message"), "1011") {
		t.Fatalf("error = %v", e)
	}
	if end := last(evs); end.str("reason") != "error" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v, want error", end)
	}

	u2 := nextUpstream(t, script)
	if u2.Setup.ResumeHandle() != handle {
		t.Fatalf("reconnected with handle %q, want the last one %q", u2.Setup.ResumeHandle(), handle)
	}
	// Still in voice: the next exchange works both ways.
	if err := c.sendAudio(pcm(2, 1280)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "microphone audio on the new upstream", func() bool { return bytes.Equal(u2.audio(), pcm(2, 1280)) })
	must(t, u2.SendOutputTranscript("Sunny."))
	must(t, u2.SendAudio(pcm(3, 960)))
	must(t, u2.SendTurnComplete(nil))
	fs := c.recvUntil("turn.done")
	noticed(t, events(fs))
	if end := last(events(fs)); end.str("reason") != "end_turn" || end["turn"] != float64(2) || !bytes.Equal(audioOf(fs), pcm(3, 960)) {
		t.Fatalf("turn after the reconnect: %v (%d bytes of audio)", end, len(audioOf(fs)))
	}
}

func TestVoiceResumeOnAnotherGatewayStartsAFreshUpstreamWithTheHistory(t *testing.T) {
	addr := redistest.Start(t) // a real redis-server shared by both gateways
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	a, scriptA := startVoiceGateway(t, cfg, nil)
	b, scriptB := startVoiceGateway(t, cfg, nil)

	c, ready, uA := startInVoice(t, a, scriptA)
	_, err := uA.SendResumptionUpdate(true) // a handle only gateway A's model knows
	must(t, err)
	must(t, uA.SendInputTranscript("Where is my order?"))
	must(t, uA.SendOutputTranscript("It left yesterday."))
	must(t, uA.SendTurnComplete(nil))
	c.until("turn.done")
	_ = c.c.CloseNow() // the connection drops
	uA.waitEnded()
	// A voice turn's transcripts are stored without holding up the audio;
	// a reconnect reaches another node after A has written them (A's
	// session ends once its queued writes have landed).
	testwait.For(t, "gateway A to finish the dropped session", func() bool { return a.gw.sessions.Active() == 0 })

	c2 := b.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	if again["resumed"] != true || again.str("sessionId") != ready.str("sessionId") {
		t.Fatalf("resume on gateway B: %v", again)
	}
	if ev := c2.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after resuming on B: %v, want mode voice", ev)
	}
	// B's model cannot resume A's handle: B starts a new upstream seeded
	// with the conversation.
	uB := nextUpstream(t, scriptB)
	if uB.Setup.ResumeHandle() != "" || uB.Resumed {
		t.Fatalf("B's upstream set up with handle %q", uB.Setup.ResumeHandle())
	}
	testwait.For(t, "the history seeding B's upstream", func() bool { return len(uB.ofKind(fakegemini.EventClientContent)) == 1 })
	seed := uB.ofKind(fakegemini.EventClientContent)[0]
	if got := strings.Join(contentTexts(seed), "|"); got != "user:Where is my order?|model:It left yesterday." || seed.TurnComplete {
		t.Fatalf("B's upstream seeded with %q (turnComplete %v)", got, seed.TurnComplete)
	}

	if err := c2.sendAudio(pcm(1, 1280)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "microphone audio on B's upstream", func() bool { return bytes.Equal(uB.audio(), pcm(1, 1280)) })
	must(t, uB.SendOutputTranscript("Anything else?"))
	must(t, uB.SendTurnComplete(nil))
	evs := c2.until("turn.done")
	if end := last(evs); end.str("reason") != "end_turn" || end["turn"] != float64(2) {
		t.Fatalf("turn on B = %v", end)
	}
	for _, e := range ofType(evs, "error") {
		t.Fatalf("error on B: %v", e)
	}
	noUpstream(t, scriptA)
}
