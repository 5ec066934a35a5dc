package fakegemini

import (
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// strictLive connects the SDK to a strict server whose Live brain is a
// LiveScript; violations are checked by each test itself.
func strictLive(t *testing.T) (*Server, *liveClient, *LiveSession) {
	t.Helper()
	brain := NewLiveScript()
	srv, base := startLive(t, brain)
	srv.SetStrict(true)
	c := connectLive(t, base, nil)
	c.skipSetupComplete(t)
	return srv, c, takeSession(t, brain)
}

func respond(t *testing.T, c *liveClient, rs ...*genai.FunctionResponse) {
	t.Helper()
	if err := c.sess.SendToolResponse(genai.LiveToolResponseInput{FunctionResponses: rs}); err != nil {
		t.Fatalf("send tool response: %v", err)
	}
}

func wantViolation(t *testing.T, srv *Server, substr string) {
	t.Helper()
	testwait.For(t, "a violation", func() bool { return len(srv.Violations()) > 0 })
	if v := srv.Violations(); len(v) != 1 || !strings.Contains(v[0], substr) {
		t.Errorf("violations %q, want one saying %q", v, substr)
	}
}

func TestStrictLiveRefusesToolResponsesThatMatchNoCall(t *testing.T) {
	cases := []struct {
		name      string
		responses func(id string) []*genai.FunctionResponse
		violation string
	}{
		{"unknown id", func(string) []*genai.FunctionResponse {
			return []*genai.FunctionResponse{{ID: "c1-0-0", Name: "kb_search", Response: map[string]any{}}}
		}, `id "c1-0-0", which matches no toolCall`},
		{"no id", func(string) []*genai.FunctionResponse {
			return []*genai.FunctionResponse{{Name: "kb_search", Response: map[string]any{}}}
		}, "has no id"},
		{"answered twice in one message", func(id string) []*genai.FunctionResponse {
			return []*genai.FunctionResponse{{ID: id, Name: "kb_search"}, {ID: id, Name: "kb_search"}}
		}, "a second time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, s := strictLive(t)
			ids, err := s.SendToolCall(Call{Name: "kb_search"})
			if err != nil {
				t.Fatal(err)
			}
			if m := c.next(t); m.ToolCall == nil {
				t.Fatalf("got %+v, want the tool call", m)
			}
			respond(t, c, tc.responses(ids[0])...)
			// The real service refuses a malformed tool response with 1007.
			if ce := c.closeError(t); ce.Code != 1007 || ce.Text != reasonInvalidArgument {
				t.Errorf("close %d %q, want 1007 %q", ce.Code, ce.Text, reasonInvalidArgument)
			}
			wantViolation(t, srv, tc.violation)
		})
	}
}

func TestStrictLiveRefusesASecondAnswer(t *testing.T) {
	srv, c, s := strictLive(t)
	ids, err := s.SendToolCall(Call{Name: "kb_search"})
	if err != nil {
		t.Fatal(err)
	}
	c.next(t)
	respond(t, c, &genai.FunctionResponse{ID: ids[0], Name: "kb_search", Response: map[string]any{"output": 1}})
	if ev := nextEvent(t, s); ev.Kind != EventToolResponse {
		t.Fatalf("brain got %s, want the answer", ev.Kind)
	}
	respond(t, c, &genai.FunctionResponse{ID: ids[0], Name: "kb_search", Response: map[string]any{"output": 2}})
	if ce := c.closeError(t); ce.Code != 1007 {
		t.Errorf("close %d, want 1007", ce.Code)
	}
	wantViolation(t, srv, `answers call "`+ids[0]+`" a second time`)
}

// TestStrictLiveAllowsWhatTheRealServiceAllows covers answers that look
// repeated or late but are legal: a NON_BLOCKING call streams several
// responses with willContinue, and an answer may cross the model's
// cancellation on the wire.
func TestStrictLiveAllowsWhatTheRealServiceAllows(t *testing.T) {
	srv, c, s := strictLive(t)
	ids, err := s.SendToolCall(Call{Name: "watch"}, Call{Name: "kb_search"})
	if err != nil {
		t.Fatal(err)
	}
	c.next(t)
	if err := s.SendToolCallCancellation(ids[1]); err != nil {
		t.Fatal(err)
	}
	c.next(t)
	respond(t, c,
		&genai.FunctionResponse{ID: ids[0], Name: "watch", WillContinue: genai.Ptr(true), Response: map[string]any{"output": 1}},
		&genai.FunctionResponse{ID: ids[1], Name: "kb_search", Response: map[string]any{"output": "late"}})
	respond(t, c, &genai.FunctionResponse{ID: ids[0], Name: "watch", WillContinue: genai.Ptr(true), Response: map[string]any{"output": 2}})
	respond(t, c, &genai.FunctionResponse{ID: ids[0], Name: "watch", WillContinue: genai.Ptr(false), Response: map[string]any{"output": 3}})
	for range 3 {
		if ev := nextEvent(t, s); ev.Kind != EventToolResponse {
			t.Fatalf("brain got %s, want tool responses", ev.Kind)
		}
	}
	if v := srv.Violations(); len(v) != 0 {
		t.Errorf("violations %q, want none", v)
	}
}

func TestStrictLiveRecordsClientContentWhileTheModelSpeaks(t *testing.T) {
	srv, c, s := strictLive(t)
	send := func(text string) {
		t.Helper()
		if err := c.sess.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text(text), TurnComplete: genai.Ptr(false)}); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, s); ev.Kind != EventClientContent || ev.UserText() != text {
			t.Fatalf("brain got %+v, want the clientContent (strict mode delivers it)", ev)
		}
	}
	send("before the model speaks") // fine: nothing is being said
	if err := s.SendAudio(make([]byte, 960)); err != nil {
		t.Fatal(err)
	}
	c.next(t)
	send("note while speaking")
	if err := s.SendTurnComplete(nil); err != nil {
		t.Fatal(err)
	}
	c.next(t)
	send("note at the turn boundary")
	if v := srv.Violations(); len(v) != 1 || !strings.Contains(v[0], `"note while speaking"`) || !strings.Contains(v[0], "while the model is speaking") {
		t.Errorf("violations %q, want exactly the note sent while the model spoke", v)
	}
}

func TestStrictLiveRecordsABadSetupModel(t *testing.T) {
	for model, want := range map[string]string{
		"gemini-live":              `"gemini-live" is not models/{model}`,
		"models/":                  `"models/" is not models/{model}`,
		"models/projects/p/models": "is not models/{model}",
	} {
		t.Run(model, func(t *testing.T) {
			srv, base := startLive(t, NewLiveScript())
			srv.SetStrict(true)
			conn := rawDial(t, base, "?key=k", nil)
			_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"`+model+`"}}`))
			if ce := rawCloseError(t, conn); ce.Code != 1007 {
				t.Errorf("close %d, want 1007", ce.Code)
			}
			wantViolation(t, srv, want)
		})
	}
}
