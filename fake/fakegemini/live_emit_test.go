package fakegemini

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"google.golang.org/genai"
)

func TestLiveEmittersDecodeInTheSDK(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	c := connectLive(t, base, &genai.LiveConnectConfig{SessionResumption: &genai.SessionResumptionConfig{}})
	c.skipSetupComplete(t)
	s := takeSession(t, brain)

	pcm := synthMelody(answerMelody)[:1920]
	var handle string
	cases := []struct {
		name  string
		emit  func() error
		check func(m *genai.LiveServerMessage) bool
	}{
		{"audio", func() error { return s.SendAudio(pcm) }, func(m *genai.LiveServerMessage) bool {
			sc := m.ServerContent
			if sc == nil || sc.ModelTurn == nil || len(sc.ModelTurn.Parts) != 1 || sc.ModelTurn.Parts[0].InlineData == nil {
				return false
			}
			d := sc.ModelTurn.Parts[0].InlineData
			return d.MIMEType == "audio/pcm;rate=24000" && bytes.Equal(d.Data, pcm)
		}},
		{"text", func() error { return s.SendText("Hello!") }, func(m *genai.LiveServerMessage) bool {
			return m.ServerContent != nil && m.ServerContent.ModelTurn != nil && m.ServerContent.ModelTurn.Parts[0].Text == "Hello!"
		}},
		{"input transcript", func() error { return s.SendInputTranscript(" What's the weather") }, func(m *genai.LiveServerMessage) bool {
			return m.ServerContent != nil && m.ServerContent.InputTranscription != nil &&
				m.ServerContent.InputTranscription.Text == " What's the weather"
		}},
		{"output transcript", func() error { return s.SendOutputTranscript("It is sunny") }, func(m *genai.LiveServerMessage) bool {
			return m.ServerContent != nil && m.ServerContent.OutputTranscription != nil &&
				m.ServerContent.OutputTranscription.Text == "It is sunny"
		}},
		{"generationComplete", s.SendGenerationComplete, func(m *genai.LiveServerMessage) bool {
			return m.ServerContent != nil && m.ServerContent.GenerationComplete && !m.ServerContent.TurnComplete
		}},
		{"turnComplete with usage", func() error {
			return s.SendTurnComplete(&genai.UsageMetadata{PromptTokenCount: 554, ResponseTokenCount: 19, TotalTokenCount: 573})
		}, func(m *genai.LiveServerMessage) bool {
			return isTurnComplete(m) && m.UsageMetadata != nil && m.UsageMetadata.ResponseTokenCount == 19 &&
				m.UsageMetadata.PromptTokenCount == 554 && m.UsageMetadata.TotalTokenCount == 573
		}},
		{"turnComplete without usage", func() error { return s.SendTurnComplete(nil) }, func(m *genai.LiveServerMessage) bool {
			return isTurnComplete(m) && m.UsageMetadata == nil
		}},
		{"interrupted", s.SendInterrupted, func(m *genai.LiveServerMessage) bool {
			return m.ServerContent != nil && m.ServerContent.Interrupted
		}},
		{"tool call", func() error {
			ids, err := s.SendToolCall(
				Call{Name: "kb_search", Args: map[string]any{"query": "hours", "limit": 3}},
				Call{ID: "mine", Name: "end_voice_session"})
			if err == nil && (len(ids) != 2 || ids[0] == "" || ids[1] != "mine") {
				t.Errorf("SendToolCall ids = %q", ids)
			}
			return err
		}, func(m *genai.LiveServerMessage) bool {
			if m.ToolCall == nil || len(m.ToolCall.FunctionCalls) != 2 {
				return false
			}
			a, b := m.ToolCall.FunctionCalls[0], m.ToolCall.FunctionCalls[1]
			return a.ID != "" && a.Name == "kb_search" && a.Args["query"] == "hours" && a.Args["limit"] == 3.0 &&
				b.ID == "mine" && b.Name == "end_voice_session" && b.Args != nil && len(b.Args) == 0
		}},
		{"tool call cancellation", func() error { return s.SendToolCallCancellation("a", "b") }, func(m *genai.LiveServerMessage) bool {
			return m.ToolCallCancellation != nil && slices.Equal(m.ToolCallCancellation.IDs, []string{"a", "b"})
		}},
		{"goAway", func() error { return s.SendGoAway(50 * time.Second) }, func(m *genai.LiveServerMessage) bool {
			return m.GoAway != nil && m.GoAway.TimeLeft == 50*time.Second
		}},
		{"goAway under a second", func() error { return s.SendGoAway(500 * time.Millisecond) }, func(m *genai.LiveServerMessage) bool {
			return m.GoAway != nil && m.GoAway.TimeLeft == 500*time.Millisecond
		}},
		{"resumable update", func() error {
			var err error
			handle, err = s.SendResumptionUpdate(true)
			return err
		}, func(m *genai.LiveServerMessage) bool {
			u := m.SessionResumptionUpdate
			return u != nil && u.Resumable && u.NewHandle != "" && u.NewHandle == handle
		}},
		{"not resumable update", func() error { _, err := s.SendResumptionUpdate(false); return err }, func(m *genai.LiveServerMessage) bool {
			u := m.SessionResumptionUpdate
			return u != nil && !u.Resumable && u.NewHandle == ""
		}},
		{"raw message", func() error {
			return s.Send(map[string]any{"serverContent": map[string]any{"waitingForInput": true}})
		}, func(m *genai.LiveServerMessage) bool {
			return m.ServerContent != nil && m.ServerContent.WaitingForInput
		}},
	}
	for _, tc := range cases {
		if err := tc.emit(); err != nil {
			t.Fatalf("%s: emit: %v", tc.name, err)
		}
		if m := c.next(t); !tc.check(m) {
			t.Errorf("%s: SDK decoded %+v", tc.name, m)
		}
	}
}

func TestLiveEmittersFailOnceTheConnectionIsClosing(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	c := connectLive(t, base, nil)
	s := takeSession(t, brain)

	if err := s.SendGoAway(time.Second); err != nil {
		t.Fatalf("goAway: %v", err)
	}
	if err := s.Close(1000, ""); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.SendText("too late"); err != ErrLiveClosed {
		t.Errorf("emit after Close = %v, want ErrLiveClosed", err)
	}
	if err := s.Close(1011, "again"); err != ErrLiveClosed {
		t.Errorf("second Close = %v, want ErrLiveClosed", err)
	}
	c.skipSetupComplete(t)
	// What was queued before Close still arrives, then the close frame.
	if m := c.next(t); m.GoAway == nil {
		t.Fatalf("got %+v, want the goAway queued before Close", m)
	}
	if ce := c.closeError(t); ce.Code != 1000 {
		t.Errorf("close code %d, want 1000", ce.Code)
	}
}

func TestLiveCloseRefusesCodesThatCannotBeSent(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	c := connectLive(t, base, nil)
	c.skipSetupComplete(t)
	s := takeSession(t, brain)
	for _, code := range []int{0, 999, 1005, 1006, 1015, 2000, 5000} {
		if err := s.Close(code, "x"); err == nil || err == ErrLiveClosed {
			t.Errorf("Close(%d) = %v, want a refusal", code, err)
		}
	}
	// The connection is still usable.
	if err := s.SendText("still here"); err != nil {
		t.Fatalf("send after refused closes: %v", err)
	}
	if m := c.next(t); m.ServerContent == nil || m.ServerContent.ModelTurn == nil {
		t.Errorf("got %+v, want the text", m)
	}
}
