package voice

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// The real service can end a turn before the client answered a call made in
// it: audio → toolCall → audio → generationComplete → turnComplete. The
// call still runs and is answered; its turn ends only then.
func TestCallAnsweredAfterTurnCompleteIsAnsweredAndKeepsItsTurnOpen(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960), call("c1", "slow"), audioEv(960), genComplete, turnComplete)
	testwait.For(t, "the turn's output", func() bool { return r.host.audioLen() == 1920 })
	if slices.Contains(r.host.types(), "turn.done:end_turn") || len(r.up.sends()) != 0 {
		t.Fatalf("events %v, sends %+v: the turn ended or the call was answered before it ran",
			r.host.types(), r.up.sends())
	}
	close(r.tools.release)
	testwait.For(t, "the call's answer upstream", func() bool { return len(r.up.sends()) == 1 })
	if s := r.up.sends()[0]; s.kind != "tools" || s.responses[0].ID != "c1" || s.responses[0].Response["ok"] != true {
		t.Fatalf("sent %+v, want the answer to c1", s)
	}
	testwait.For(t, "turn.done", func() bool { return slices.Contains(r.host.types(), "turn.done:end_turn") })
	// What the model says after the answer is a turn of its own.
	r.up.say(audioEv(960), turnComplete)
	testwait.For(t, "the next turn", func() bool { return len(r.host.ofType("turn.done")) == 2 })
	if done := r.host.ofType("turn.done"); done[0]["turn"] != 1.0 || done[1]["turn"] != 2.0 {
		t.Errorf("turn.done %v, want turns 1 then 2", done)
	}
}

// A call the model withdraws (toolCallCancellation) is never answered, and
// its turn ends without waiting for it.
func TestCancelledCallIsNotAnsweredAndTheTurnEnds(t *testing.T) {
	r := newRig(t)
	r.up.say(call("c1", "slow"), turnComplete)
	testwait.For(t, "the call to run", func() bool { _, ok := r.tools.ran.Load("slow"); return ok })
	r.up.say(transport.LiveEvent{Kind: transport.LiveToolCancel, IDs: []string{"c1"}})
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	if s := r.up.sends(); len(s) != 0 {
		t.Errorf("sent %+v, want nothing for a cancelled call", s)
	}
}

// Once a terminal tool's result is in, nothing more of the turn reaches
// the browser; the terminal text is the answer, and the turn ends
// terminal_tool at its turnComplete.
func TestTerminalResultInVoiceQuietsTheRestOfTheTurn(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960), outText("Let me "), call("h", "hang_up"))
	testwait.For(t, "text.done", func() bool { return len(r.host.ofType("text.done")) == 1 })
	if got := r.host.ofType("text.done")[0]["text"]; got != "Goodbye, and thanks for calling." {
		t.Fatalf("text.done %q, want the terminal output", got)
	}
	r.up.say(audioEv(960), outText("and one more thing"), turnComplete)
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	if r.host.audioLen() != 960 || len(r.host.ofType("transcript.output")) != 1 {
		t.Errorf("after the terminal result the browser still got audio (%d bytes) or transcripts (%v)",
			r.host.audioLen(), r.host.ofType("transcript.output"))
	}
	if done := r.host.ofType("turn.done")[0]; done["reason"] != "terminal_tool" {
		t.Errorf("turn.done %v, want terminal_tool", done)
	}
	resp := r.up.sends()[0].responses[0].Response
	if resp["instruction"] == nil {
		t.Errorf("the model was not told that the text is the final answer: %v", resp)
	}
	last := r.host.entryList()[len(r.host.entryList())-1]
	if last.Role != transport.RoleModel || last.Text != "Goodbye, and thanks for calling." {
		t.Errorf("history ends with %+v, want the terminal output as the model's answer", last)
	}
}

// SUPPRESS_AUDIO and SUPPRESS_TRANSCRIPT hold for the rest of the turn,
// transcripts both ways; the next turn is heard again.
func TestSuppressIntentsHideAudioAndBothTranscriptsForTheRestOfTheTurn(t *testing.T) {
	r := newRig(t)
	r.up.say(inText("hello"), audioEv(960), call("q", "quiet"))
	testwait.For(t, "the intents", func() bool { return len(r.up.sends()) == 1 })
	r.up.say(inText(" again"), audioEv(960), outText("secret"), turnComplete)
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	if r.host.audioLen() != 960 || len(r.host.ofType("transcript.input")) != 1 || len(r.host.ofType("transcript.output")) != 0 {
		t.Fatalf("audio %d bytes, transcripts in %v out %v: want the suppressed part hidden",
			r.host.audioLen(), r.host.ofType("transcript.input"), r.host.ofType("transcript.output"))
	}
	r.up.say(inText("next"), audioEv(960), outText("heard"), turnComplete)
	testwait.For(t, "the next turn", func() bool { return len(r.host.ofType("turn.done")) == 2 })
	if r.host.audioLen() != 1920 || len(r.host.ofType("transcript.output")) != 1 {
		t.Errorf("the next turn is still suppressed")
	}
}

// SET_PENDING_MESSAGE reaches the model at the next turn boundary as
// context, never while the model is answering (a clientContent then would
// cut the answer off).
func TestPendingMessageReachesTheModelAtTheTurnBoundaryNeverMidAnswer(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960), call("p", "remind"))
	testwait.For(t, "the call's answer", func() bool { return len(r.up.sends()) == 1 })
	r.up.say(audioEv(960))
	testwait.For(t, "more audio", func() bool { return r.host.audioLen() == 1920 })
	if s := r.up.sends(); len(s) != 1 {
		t.Fatalf("sent %+v mid-answer, want only the tool response", s)
	}
	r.up.say(turnComplete)
	testwait.For(t, "the note", func() bool { return len(r.up.sends()) == 2 })
	if s := r.up.sends()[1]; s.kind != "context" || s.text != "the user prefers short answers" {
		t.Errorf("sent %+v, want the note as context at the boundary", s)
	}
}

// A confirmation's outcome, and text the user types, wait while the model
// speaks and go out as a user turn right after its turnComplete; when the
// model is quiet they go at once.
func TestUserInputWaitsWhileTheModelSpeaks(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960))
	testwait.For(t, "the model speaking", func() bool { return r.host.audioLen() == 960 })
	r.v.Confirmed("[The user approved your pending call to transfer.]")
	r.v.Text("and quickly")
	if s := r.up.sends(); len(s) != 0 {
		t.Fatalf("sent %+v while the model speaks", s)
	}
	r.up.say(turnComplete)
	testwait.For(t, "the waiting input", func() bool { return len(r.up.sends()) == 2 })
	s := r.up.sends()
	if s[0].kind != "text" || !strings.Contains(s[0].text, "approved") || s[1].kind != "text" || s[1].text != "and quickly" {
		t.Fatalf("sent %+v, want the outcome then the text, as user turns", s)
	}
	// Quiet now: a new confirmation goes at once.
	r.up.say(turnComplete) // the model's reply to them ends
	testwait.For(t, "the reply's end", func() bool { return len(r.host.ofType("turn.done")) == 2 })
	r.v.Confirmed("[The user declined.]")
	testwait.For(t, "the outcome", func() bool { return len(r.up.sends()) == 3 })
}

// A block ends voice at once: the upstream closes, no more audio goes up,
// and the host is told.
func TestBlockEndsVoiceAtOnce(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960))
	testwait.For(t, "the model speaking", func() bool { return r.host.audioLen() == 960 })
	r.v.Block()
	if got := <-r.host.ended; got != "blocked" {
		t.Fatalf("ended %q, want blocked", got)
	}
	if !r.up.isClosed() {
		t.Fatal("the upstream is still open")
	}
	r.v.Mic(time.Now(), make([]byte, 640))
	r.v.Text("let me in")
	if len(r.up.audioSent()) != 0 || len(r.up.sends()) != 0 {
		t.Errorf("after the block the model still got audio (%d bytes) or %+v", len(r.up.audioSent()), r.up.sends())
	}
}

// Every resumable update's handle is kept at once, before any turn ends, so
// that a browser that drops mid-turn resumes its Live session.
func TestResumptionHandleIsSavedOnEveryResumableUpdate(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960), transport.LiveEvent{Kind: transport.LiveResumption, Handle: "h-1", Resumable: true},
		transport.LiveEvent{Kind: transport.LiveResumption, Handle: "h-x", Resumable: false})
	testwait.For(t, "the handle", func() bool { return len(r.host.handleList()) == 1 })
	if r.host.handleList()[0] != "h-1" || r.v.Handle() != "h-1" {
		t.Errorf("handles %v (current %q), want h-1 only", r.host.handleList(), r.v.Handle())
	}
}

// A barge-in cancels the turn's calls (never answered) and the turn ends
// interrupted.
func TestBargeInCancelsCallsAndEndsTheTurnInterrupted(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960), call("c1", "slow"))
	testwait.For(t, "the call to run", func() bool { _, ok := r.tools.ran.Load("slow"); return ok })
	r.up.say(transport.LiveEvent{Kind: transport.LiveInterrupted}, audioEv(960), turnComplete)
	testwait.For(t, "turn.done", func() bool { return len(r.host.ofType("turn.done")) == 1 })
	if done := r.host.ofType("turn.done")[0]; done["reason"] != "interrupted" {
		t.Errorf("turn.done %v, want interrupted", done)
	}
	if len(r.host.ofType("audio.interrupted")) != 1 || r.host.audioLen() != 960 {
		t.Errorf("audio.interrupted %v, audio %d bytes: want the flush and nothing after it",
			r.host.ofType("audio.interrupted"), r.host.audioLen())
	}
	if s := r.up.sends(); len(s) != 0 {
		t.Errorf("sent %+v, want no answer for a call cancelled by barge-in", s)
	}
}

// END_VOICE_SESSION: the goodbye plays out with barge-in locked out, then
// the upstream closes and the session is back in text.
func TestEndVoiceSessionDrainsTheGoodbyeThenEnds(t *testing.T) {
	r := newRig(t)
	r.up.say(call("b", "bye"))
	testwait.For(t, "the call's answer", func() bool { return len(r.up.sends()) == 1 })
	r.up.say(audioEv(960), transport.LiveEvent{Kind: transport.LiveInterrupted}, audioEv(960))
	testwait.For(t, "the goodbye", func() bool { return r.host.audioLen() == 1920 })
	if len(r.host.ofType("audio.interrupted")) != 0 {
		t.Error("a barge-in cut the goodbye")
	}
	r.v.Mic(time.Now(), make([]byte, 640))
	if len(r.up.audioSent()) != 0 {
		t.Error("microphone audio reached the model while voice ends")
	}
	r.up.say(turnComplete)
	if got := <-r.host.ended; got != "end_voice_session" {
		t.Fatalf("ended %q", got)
	}
	if !r.up.isClosed() || len(r.host.ofType("turn.done")) != 1 {
		t.Errorf("upstream closed %v, turn.done %v", r.up.isClosed(), r.host.ofType("turn.done"))
	}
}

// HAND_OFF: the host hears of the hand-off at once; the model's closing
// words play out, then voice ends as for END_VOICE_SESSION.
func TestHandOffLetsTheClosingWordsPlayThenEndsVoice(t *testing.T) {
	r := newRig(t)
	r.up.say(call("h", "to_person"))
	testwait.For(t, "the call's answer", func() bool { return len(r.up.sends()) == 1 })
	if got := r.host.handedOff(); len(got) != 1 || got[0] != "refund: wants 300 EUR back" {
		t.Fatalf("the host heard hand-offs %v", got)
	}
	r.up.say(audioEv(960))
	testwait.For(t, "the closing words", func() bool { return r.host.audioLen() == 960 })
	if r.up.isClosed() {
		t.Fatal("the upstream closed before the closing words were spoken")
	}
	r.up.say(turnComplete)
	if got := <-r.host.ended; got != "handoff" {
		t.Fatalf("ended %q, want handoff", got)
	}
	if !r.up.isClosed() {
		t.Error("the upstream is still open after the hand-off's turn")
	}
}

// goAway: at the next resumable moment between turns the upstream is
// replaced by one resuming the handle; microphone audio meanwhile is kept
// and arrives in order.
func TestGoAwayReplacesTheUpstreamWithoutLosingMicrophoneAudio(t *testing.T) {
	r := newRig(t)
	<-r.live.configs // the first connect
	r.up.say(transport.LiveEvent{Kind: transport.LiveResumption, Handle: "h-7", Resumable: true},
		transport.LiveEvent{Kind: transport.LiveGoAway})
	cfg := <-r.live.configs
	next := <-r.live.ups
	if cfg.ResumeHandle != "h-7" {
		t.Fatalf("the new upstream resumes %q, want h-7", cfg.ResumeHandle)
	}
	for i := range 3 {
		r.v.Mic(time.Now(), []byte{byte(i), byte(i)})
	}
	testwait.For(t, "the audio upstream", func() bool { return len(next.audioSent()) == 6 })
	if !r.up.isClosed() || string(next.audioSent()) != "\x00\x00\x01\x01\x02\x02" {
		t.Errorf("old closed %v, new upstream got %v", r.up.isClosed(), next.audioSent())
	}
}
