package voice

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
)

// The end of speech is the LAST speech before the answer: speech, a pause,
// speech again, silence, then the answer is timed from the second speech;
// the answer consumes the mark, so the next turn's first audio without new
// speech is not timed.
func TestVoiceResponseIsTimedFromTheLastSpeechBeforeTheAnswer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		op   string // speech, audioEnd, text, answer, silentTurn
		ms   int
		want time.Duration // for answer: -1 for none
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"speech, pause, speech again", []step{{"speech", 0, 0}, {"speech", 400, 0}, {"speech", 1500, 0},
			{"answer", 2300, 800 * time.Millisecond}, {"answer", 5000, -1}}},
		{"no speech, no measure", []step{{"answer", 100, -1}}},
		{"audio.end after speech moves the end", []step{{"speech", 0, 0}, {"audioEnd", 300, 0},
			{"answer", 1000, 700 * time.Millisecond}}},
		{"audio.end with no speech marks nothing", []step{{"audioEnd", 0, 0}, {"answer", 900, -1}}},
		{"audio.end after the answer marks nothing", []step{{"speech", 0, 0}, {"answer", 500, 500 * time.Millisecond},
			{"audioEnd", 600, 0}, {"answer", 3000, -1}}},
		{"typed input drops the mark", []step{{"speech", 0, 0}, {"text", 100, 0}, {"answer", 900, -1}}},
		{"a turn with no audio answered the speech before it", []step{{"speech", 0, 0}, {"silentTurn", 200, 0},
			{"answer", 5000, -1}}},
		{"speech during a silent turn waits for the next answer", []step{{"speech", 0, 0}, {"speech", 700, 0},
			{"silentTurn", 500, 0}, {"answer", 1000, 300 * time.Millisecond}}},
		{"barge-in speech is timed to the next turn's answer", []step{{"speech", 0, 0},
			{"answer", 600, 600 * time.Millisecond}, {"speech", 900, 0}, {"speech", 1200, 0},
			{"answer", 2000, 800 * time.Millisecond}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s speechEnd
			for i, st := range c.steps {
				switch st.op {
				case "speech":
					s.mark(at(st.ms))
				case "audioEnd":
					s.clientEnd(at(st.ms))
				case "text":
					s.clear()
				case "silentTurn":
					s.silent(at(st.ms)) // the turn's output began at ms
				case "answer":
					d, ok := s.answered(at(st.ms))
					if st.want < 0 && ok {
						t.Fatalf("step %d: answer timed %v, want no measure", i, d)
					}
					if st.want >= 0 && (!ok || d != st.want) {
						t.Fatalf("step %d: answer timed %v (%v), want %v", i, d, ok, st.want)
					}
				}
			}
		})
	}
}

// loudFrame is 20 ms of 16 kHz PCM16 well above audio.SpeechRMS.
func loudFrame() []byte {
	b := make([]byte, 640)
	for i := 0; i < len(b); i += 2 {
		v := uint16(8000)
		if i%4 == 0 {
			v = uint16(0x10000 - 8000)
		}
		b[i], b[i+1] = byte(v), byte(v>>8)
	}
	return b
}

// Through the session: the user speaks (loud frames, then silence), the
// model answers with audio: one latency is observed, on the channel, and
// the turn carries it to the host (the timeline's voiceResponseMs). A
// second turn of model audio without new speech observes nothing, and
// neither does a turn that only had silence before it.
func TestVoiceTurnAfterSpeechObservesTheVoiceResponse(t *testing.T) {
	r := newRig(t)
	hist := r.m.VoiceResponse.WithLabelValues("browser")
	// The end of speech is the time given with the last loud frame: the
	// bound below starts there.
	var spoke time.Time
	for range 5 {
		spoke = time.Now()
		r.v.Mic(spoke, loudFrame())
	}
	for range 5 {
		r.v.Mic(time.Now(), make([]byte, 640))
	}
	r.up.say(audioEv(960), audioEv(960), turnComplete)
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	bound := time.Since(spoke)
	if n := testutil.CollectAndCount(r.m.VoiceResponse); n == 0 {
		t.Fatal("no voice response series")
	}
	if got := histCount(t, hist); got != 1 {
		t.Fatalf("turnstile_voice_response_seconds{channel=browser} count %d, want 1", got)
	}
	resp := r.host.turnResponses()
	if len(resp) != 1 || resp[0] <= 0 || resp[0] > bound {
		t.Fatalf("the turn's voice response %v, want one in (0, %v]", resp, bound)
	}

	// The model speaks again with nobody having spoken: not an answer.
	r.up.say(audioEv(960), turnComplete)
	testwait.For(t, "the second turn.done", func() bool { return len(r.host.ofType("turn.done")) == 2 })
	if got := histCount(t, hist); got != 1 {
		t.Fatalf("count %d after a turn with no speech before it, want still 1", got)
	}
	if resp := r.host.turnResponses(); resp[1] != 0 {
		t.Fatalf("the second turn's voice response %v, want none", resp[1])
	}
}

// A turn that completes with no audio (a text-only answer) observes
// nothing, and the speech it answered is not charged to a later answer.
func TestVoiceTurnWithoutModelAudioObservesNothing(t *testing.T) {
	r := newRig(t)
	hist := r.m.VoiceResponse.WithLabelValues("browser")
	r.v.Mic(time.Now(), loudFrame())
	r.up.say(outText("just text"), turnComplete)
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	r.up.say(audioEv(960), turnComplete)
	testwait.For(t, "the second turn.done", func() bool { return len(r.host.ofType("turn.done")) == 2 })
	if got := histCount(t, hist); got != 0 {
		t.Fatalf("count %d, want 0: no turn answered speech with audio", got)
	}
}

// Barge-in: the user speaks over the answer; the interrupted turn's
// latency stands, and the answer to the interruption is timed from the
// barge-in speech. Audio of the interrupted turn that is dropped is no
// answer.
func TestBargeInSpeechIsTimedToTheNextAnswer(t *testing.T) {
	r := newRig(t)
	hist := r.m.VoiceResponse.WithLabelValues("browser")
	r.v.Mic(time.Now(), loudFrame())
	r.up.say(audioEv(960))
	testwait.For(t, "the answer", func() bool { return r.host.audioLen() == 960 })
	r.v.Mic(time.Now(), loudFrame()) // the user talks over it
	r.up.say(transport.LiveEvent{Kind: transport.LiveInterrupted}, audioEv(960), turnComplete)
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	if got := histCount(t, hist); got != 1 {
		t.Fatalf("count %d after the interrupted turn, want 1", got)
	}
	r.up.say(audioEv(960), turnComplete)
	testwait.For(t, "the answer to the barge-in", func() bool { return len(r.host.ofType("turn.done")) == 2 })
	if got := histCount(t, hist); got != 2 {
		t.Fatalf("count %d, want 2: the answer to the barge-in is timed", got)
	}
	if resp := r.host.turnResponses(); len(resp) != 2 || resp[0] <= 0 || resp[1] <= 0 {
		t.Fatalf("voice responses %v, want both turns timed", resp)
	}
}

// histCount is how many samples a histogram series holds.
func histCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	m, ok := o.(prometheus.Metric)
	if !ok {
		t.Fatal("not a histogram")
	}
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}
