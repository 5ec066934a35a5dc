package gateway_test

// Voice-to-voice latency end to end: the user speaks (speech, then
// silence, or speech then the client's audio.end), the model answers with
// audio, and turnstile_voice_response_seconds, the turn's timeline entry
// and turnstile_relay_added_seconds show it — for a browser and for a
// phone call.

import (
	"testing"

	"github.com/turnstile-gw/turnstile/audio"
	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/speechlike"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/session/voice"
	"github.com/turnstile-gw/turnstile/timeline"
)

// micFrame is 20 ms of 16 kHz PCM16 microphone audio.
const micFrame = 640

// speak sends 200 ms of speech-like sound, then (when silence) 200 ms of
// silence, and waits until the model has all of it: the answer that
// follows comes after the end of the speech.
func speak(t *testing.T, c *wsClient, u *upstream, silence bool) {
	t.Helper()
	before := len(u.audio())
	speech := speechlike.Render(16000, 10*micFrame/2)
	for i := 0; i < len(speech); i += micFrame {
		if err := c.sendAudio(speech[i : i+micFrame]); err != nil {
			t.Fatal(err)
		}
	}
	sent := len(speech)
	if silence {
		for range 10 {
			if err := c.sendAudio(make([]byte, micFrame)); err != nil {
				t.Fatal(err)
			}
		}
		sent += 10 * micFrame
	}
	testwait.For(t, "the microphone audio upstream", func() bool { return len(u.audio()) >= before+sent })
}

// answer has the model speak n chunks of 40 ms and end its turn; the
// browser hears them up to turn.done.
func answer(t *testing.T, c *wsClient, u *upstream, n int) {
	t.Helper()
	for i := range n {
		must(t, u.SendAudio(pcm(i, 1920)))
	}
	must(t, u.SendTurnComplete(nil))
	if end := last(events(c.recvUntil("turn.done"))); end.str("reason") != "end_turn" {
		t.Fatalf("turn.done %v", end)
	}
}

// voiceResponses is the count and sum of turnstile_voice_response_seconds
// on a channel.
func voiceResponses(t *testing.T, g *testGateway, channel string) (count, sum float64) {
	t.Helper()
	url, ch := g.adminURL+"/metrics", map[string]string{"channel": channel}
	return scrapeValue(t, url, "turnstile_voice_response_seconds_count", ch),
		scrapeValue(t, url, "turnstile_voice_response_seconds_sum", ch)
}

// The test's own bound on a latency: anything the metric reports must be
// shorter than the test may run.
const latencyBound = 60.0 // seconds

func TestVoiceResponseIsObservedFromTheEndOfSpeechToTheFirstAnswerAudio(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, ready, u := startInVoice(t, g, script)

	// Turn 1: speech then silence (the gateway's energy check), and an
	// answer of 16 chunks.
	speak(t, c, u, true)
	answer(t, c, u, 16)
	n, sum := voiceResponses(t, g, "browser")
	if n != 1 || sum <= 0 || sum >= latencyBound {
		t.Fatalf("after the first answer turnstile_voice_response_seconds{channel=browser}: count %v sum %v s, want 1 and 0 < sum < %v",
			n, sum, latencyBound)
	}

	// Turn 2: the model speaks again with nobody having spoken: not an
	// answer to speech, nothing observed.
	answer(t, c, u, 1)
	if n, _ := voiceResponses(t, g, "browser"); n != 1 {
		t.Fatalf("count %v after model audio nobody asked for, want still 1", n)
	}

	// Turn 3: client-side voice detection: speech, then the client's
	// audio.end ends it.
	speak(t, c, u, false)
	c.send(map[string]any{"type": "audio.end"})
	testwait.For(t, "audio.end upstream", func() bool { return len(u.ofKind(fakegemini.EventAudioStreamEnd)) == 1 })
	answer(t, c, u, 1)
	n, sum = voiceResponses(t, g, "browser")
	if n != 2 || sum <= 0 || sum >= 2*latencyBound {
		t.Fatalf("after the answer to audio.end: count %v sum %v s, want 2", n, sum)
	}

	// The timeline shows the latency of the answered turns only.
	view := waitTimeline(t, g.adminURL, ready.str("sessionId"), "three turns on the timeline",
		func(v timeline.View) bool { return len(v.Turns) == 3 })
	for i, want := range []bool{true, false, true} {
		ms := view.Turns[i].VoiceResponseMs
		if (ms != nil) != want || (ms != nil && (*ms < 0 || float64(*ms) > sum*1000+1)) {
			t.Fatalf("turn %d voiceResponseMs %v, want it shown: %v (at most the metric's sum, %v s)", i+1, ms, want, sum)
		}
	}

	// The relay timed a sample of the frames each way: 30 microphone
	// frames went up, 18 chunks came down.
	url := g.adminURL + "/metrics"
	in := scrapeValue(t, url, "turnstile_relay_added_seconds_count", map[string]string{"channel": "browser", "direction": "in"})
	testwait.For(t, "the out-relay samples", func() bool {
		return scrapeValue(t, url, "turnstile_relay_added_seconds_count",
			map[string]string{"channel": "browser", "direction": "out"}) >= 18/voice.RelaySampleEvery
	})
	if in < 30/voice.RelaySampleEvery {
		t.Fatalf("turnstile_relay_added_seconds{direction=in} has %v samples after 30 frames, want at least %d",
			in, 30/voice.RelaySampleEvery)
	}
	if s := scrapeValue(t, url, "turnstile_relay_added_seconds_sum", map[string]string{"channel": "browser", "direction": "in"}); s <= 0 || s >= latencyBound {
		t.Fatalf("turnstile_relay_added_seconds_sum{direction=in} = %v", s)
	}
}

// A phone call takes the same voice path: the caller speaks, the model
// answers, and the latency is observed on the twilio channel.
func TestVoiceResponseOfAPhoneCallIsObservedOnItsChannel(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, u, _ := dialCall(t, g, script) // the greeting: no speech before it
	if n, _ := voiceResponses(t, g, "twilio"); n != 0 {
		t.Fatalf("the greeting was timed as an answer: count %v", n)
	}

	// 400 ms of loud μ-law speech, then 200 ms of silence.
	speech := audio.AppendMulaw(nil, speechlike.Render(8000, 3200))
	silence := audio.AppendMulaw(nil, make([]byte, 3200))
	sent := 0
	for _, s := range [][]byte{speech, silence} {
		for i := 0; i+audio.MulawFrame <= len(s); i += audio.MulawFrame {
			if err := c.SendMedia(callCtx(t), s[i:i+audio.MulawFrame]); err != nil {
				t.Fatal(err)
			}
			sent += audio.MulawFrame
		}
	}
	testwait.For(t, "the caller's audio upstream", func() bool { return len(u.audio()) >= audio.InboundLen(sent) })
	must(t, u.SendAudio(pcm24Tone(440, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, c); h.mark != "turn:2" {
		t.Fatalf("the answer ended with mark %q", h.mark)
	}
	n, sum := voiceResponses(t, g, "twilio")
	if n != 1 || sum <= 0 || sum >= latencyBound {
		t.Fatalf("turnstile_voice_response_seconds{channel=twilio}: count %v sum %v s, want 1", n, sum)
	}
	if n, _ := voiceResponses(t, g, "browser"); n != 0 {
		t.Fatalf("the call's answer counted on the browser channel too: %v", n)
	}
}
