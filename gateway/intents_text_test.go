package gateway_test

import (
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/tools"
)

// In text, SET_PENDING_MESSAGE reaches the model in the next turn's system
// instruction (its turn note), once; the voice-only intents a tool returns
// are not applied, and turn.done names each with why. The turn's text is
// shown as usual: SUPPRESS_AUDIO hides nothing in text.
func TestTextPendingMessageReachesTheNextTurnAndVoiceOnlyIntentsAreNamed(t *testing.T) {
	const pending = "the user prefers short answers"
	remind := testTool(t, "remind", nil, nil, okTool("ok", intents.Intent{Type: intents.SetPendingMessage, Message: pending}))
	quiet := testTool(t, "quiet", nil, nil, okTool("ok",
		intents.Intent{Type: intents.SuppressAudio}, intents.Intent{Type: intents.SuppressTranscript}))
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "remind", Args: map[string]any{}}, fakegemini.Call{Name: "quiet", Args: map[string]any{}}),
		textStep("Noted."), textStep("Short."), textStep("Still short."))
	g := startGatewayWith(t, defaultTestConfig(t), brains{text: brain, tools: []*tools.Tool{remind, quiet}})
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("remember that I like it short")
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Noted." {
		t.Fatalf("text.done = %v, want the model's answer shown (nothing to suppress in text)", done)
	}
	end := last(evs)
	ignored, _ := end["ignoredIntents"].([]any)
	var got []string
	for _, x := range ignored {
		in, _ := x.(map[string]any)
		why, _ := in["reason"].(string)
		if !strings.Contains(why, "voice only") {
			t.Errorf("ignored intent %v: reason %q does not say why", in, why)
		}
		got = append(got, in["type"].(string))
	}
	if strings.Join(got, ",") != "SUPPRESS_AUDIO,SUPPRESS_TRANSCRIPT" {
		t.Fatalf("turn.done = %v, want ignoredIntents SUPPRESS_AUDIO and SUPPRESS_TRANSCRIPT (SET_PENDING_MESSAGE applies)", end)
	}
	for i, req := range brain.Requests() {
		if strings.Contains(systemText(req), pending) {
			t.Fatalf("request %d of the turn that set it already carries the pending message", i)
		}
	}

	evs = c.ask("what is your return window?")
	if _, has := last(evs)["ignoredIntents"]; has {
		t.Fatalf("turn.done %v names intents no tool of this turn returned", last(evs))
	}
	reqs := brain.Requests()
	if got := systemText(reqs[2]); !strings.HasSuffix(got, "# Note for this turn\n"+pending) {
		t.Fatalf("next turn's system instruction ends %q, want the pending message in its turn note", got[max(0, len(got)-80):])
	}

	c.ask("and shipping?")
	if got := systemText(brain.Requests()[3]); strings.Contains(got, pending) {
		t.Fatalf("the pending message was delivered twice")
	}
}
