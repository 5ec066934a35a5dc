package builtin_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

func TestActionToolsReturnIntentsNotSideEffects(t *testing.T) {
	reg := registry(t)
	cases := []struct {
		tool, args string
		want       intents.Intent
	}{
		{"ignore_user", `{"duration_seconds": 600, "reason": "abuse"}`,
			intents.Intent{Type: intents.BlockUser, Duration: 10 * time.Minute, Reason: "abuse"}},
		{"start_voice_session", `{}`, intents.Intent{Type: intents.StartVoiceSession}},
		{"end_voice_session", `{"reason": "goodbye"}`, intents.Intent{Type: intents.EndVoiceSession, Reason: "goodbye"}},
		{"request_human", `{"reason": " refund above my limit ", "summary": "Wants 300 EUR back for order 1234."}`,
			intents.Intent{Type: intents.HandOff, Reason: "refund above my limit", Message: "Wants 300 EUR back for order 1234."}},
	}
	for _, c := range cases {
		env, _ := call(t, reg, context.Background(), c.tool, c.args)
		if !env.OK || len(env.Intents) != 1 || env.Intents[0] != c.want {
			t.Errorf("%s: %+v, want intent %+v", c.tool, env, c.want)
		}
		if err := env.Intents[0].Validate(); err != nil {
			t.Errorf("%s: invalid intent: %v", c.tool, err)
		}
	}
}

func TestIgnoreUserBoundsItsDuration(t *testing.T) {
	reg := registry(t)
	tool, _ := reg.Lookup("ignore_user")
	for _, bad := range []string{`{"duration_seconds": 5, "reason": "x"}`, `{"duration_seconds": 999999, "reason": "x"}`,
		`{"duration_seconds": 600}`, `{"duration_seconds": 600, "reason": ""}`} {
		if err := tool.ValidateArgs([]byte(bad)); err == nil {
			t.Errorf("ignore_user accepted %s", bad)
		}
	}
}

func TestRequestHumanNeedsAReasonAndASummaryAndEndsTheSession(t *testing.T) {
	reg := registry(t)
	tool, _ := reg.Lookup("request_human")
	if !tool.EndsSession || tool.Terminal || tool.Category != "action" || !slices.Equal(tool.Modes, []protocol.Mode{"text", "voice"}) {
		t.Errorf("request_human: endsSession %v, terminal %v, category %s, modes %v; want a non-terminal action "+
			"in both modes that ends the session", tool.EndsSession, tool.Terminal, tool.Category, tool.Modes)
	}
	for _, bad := range []string{`{"reason": "x"}`, `{"summary": "x"}`, `{"reason": "", "summary": "x"}`, `{}`} {
		if err := tool.ValidateArgs([]byte(bad)); err == nil {
			t.Errorf("request_human accepted %s", bad)
		}
	}
}

func TestFinishTerminatesWithTheNoteOrFinished(t *testing.T) {
	reg := registry(t)
	for args, want := range map[string]string{`{"note": "All done: order 42 shipped."}`: "All done: order 42 shipped.", `{}`: "Finished"} {
		env, _ := call(t, reg, context.Background(), "finish", args)
		if !env.OK || env.Terminate == nil || env.Terminate.Text() != want || env.Data != nil {
			t.Errorf("finish(%s) = %+v, want a termination answering %q", args, env, want)
		}
	}
	tool, _ := reg.Lookup("finish")
	if tool.Category != tools.CategoryUtility || !tool.Terminal {
		t.Errorf("finish: category %s, terminal %v; want a terminal utility", tool.Category, tool.Terminal)
	}
}

func TestEndVoiceSessionEndsASession(t *testing.T) {
	tool, _ := registry(t).Lookup("end_voice_session")
	if !tool.EndsSession || tool.Terminal {
		t.Errorf("end_voice_session: endsSession %v, terminal %v; want a non-terminal tool that ends a session",
			tool.EndsSession, tool.Terminal)
	}
}
