package geminilive_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func TestEveryServerMessageBecomesItsEvent(t *testing.T) {
	f := startFake(t)
	r := receive(t, connect(t, newModel(t, f.addr, geminilive.Options{}), transport.LiveConfig{}))
	fs := f.session(t)
	fs.SetState("conversation so far")

	pcm := []byte{0x01, 0x00, 0xff, 0x7f, 0x00, 0x80, 0x10, 0x20}
	var handle string
	steps := []struct {
		emit func() error
		want transport.LiveEvent // Handle is checked separately
	}{
		{func() error { return fs.SendInputTranscript(" What's the weather") },
			transport.LiveEvent{Kind: transport.LiveInputTranscript, Text: " What's the weather"}},
		{func() error { return fs.SendAudio(pcm) },
			transport.LiveEvent{Kind: transport.LiveAudio, Audio: pcm}},
		{func() error { return fs.SendOutputTranscript("It is sunny") },
			transport.LiveEvent{Kind: transport.LiveOutputTranscript, Text: "It is sunny"}},
		{func() error { return fs.SendText("Hello!") },
			transport.LiveEvent{Kind: transport.LiveText, Text: "Hello!"}},
		{func() error { return fs.SendGenerationComplete() },
			transport.LiveEvent{Kind: transport.LiveGenerationComplete}},
		{func() error { return fs.SendTurnComplete(nil) },
			transport.LiveEvent{Kind: transport.LiveTurnComplete}},
		{func() error { return fs.SendInterrupted() },
			transport.LiveEvent{Kind: transport.LiveInterrupted}},
		{func() error {
			_, err := fs.SendToolCall(
				fakegemini.Call{ID: "fc-1", Name: "kb_search", Args: map[string]any{"query": "refunds"}},
				fakegemini.Call{ID: "fc-2", Name: "kb_get", Args: map[string]any{"id": "doc-7"}})
			return err
		}, transport.LiveEvent{Kind: transport.LiveToolCall, Calls: []transport.FunctionCall{
			{ID: "fc-1", Name: "kb_search", Args: map[string]any{"query": "refunds"}},
			{ID: "fc-2", Name: "kb_get", Args: map[string]any{"id": "doc-7"}}}}},
		{func() error { return fs.SendToolCallCancellation("fc-1", "fc-2") },
			transport.LiveEvent{Kind: transport.LiveToolCancel, IDs: []string{"fc-1", "fc-2"}}},
		{func() error { return fs.SendGoAway(50 * time.Second) },
			transport.LiveEvent{Kind: transport.LiveGoAway, TimeLeft: 50 * time.Second}},
		{func() error {
			// Thought parts say nothing to the user; the usage that follows
			// is the next event.
			if err := fs.Send(map[string]any{"serverContent": map[string]any{"modelTurn": map[string]any{
				"role": "model", "parts": []any{map[string]any{"text": "**Planning**", "thought": true}}}}}); err != nil {
				return err
			}
			return fs.Send(map[string]any{"usageMetadata": map[string]any{"promptTokenCount": 554, "responseTokenCount": 19,
				"totalTokenCount": 573, "promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": 553},
					map[string]any{"modality": "AUDIO", "tokenCount": 1}},
				"responseTokensDetails": []any{map[string]any{"modality": "AUDIO", "tokenCount": 19}}}})
		}, transport.LiveEvent{Kind: transport.LiveTokens, Usage: &transport.LiveUsage{Input: 554, Output: 19,
			InputByModality: map[string]int{"text": 553, "audio": 1}, OutputByModality: map[string]int{"audio": 19}}}},
		{func() error {
			// Vertex AI's names: candidates, and thinking billed as output.
			return fs.Send(map[string]any{"usageMetadata": map[string]any{"promptTokenCount": 9, "candidatesTokenCount": 7,
				"thoughtsTokenCount": 3, "candidatesTokensDetails": []any{map[string]any{"modality": "AUDIO", "tokenCount": 7}}}})
		}, transport.LiveEvent{Kind: transport.LiveTokens, Usage: &transport.LiveUsage{Input: 9, Output: 10,
			OutputByModality: map[string]int{"audio": 7}}}},
		{func() error {
			var err error
			handle, err = fs.SendResumptionUpdate(true)
			return err
		}, transport.LiveEvent{Kind: transport.LiveResumption, Resumable: true}},
		{func() error { _, err := fs.SendResumptionUpdate(false); return err },
			transport.LiveEvent{Kind: transport.LiveResumption, Resumable: false}},
	}
	for _, st := range steps {
		must(t, st.emit())
	}
	for i, st := range steps {
		got := nextEvent(t, r)
		if st.want.Kind == transport.LiveResumption && st.want.Resumable {
			if got.Handle != handle || handle == "" {
				t.Errorf("event %d handle = %q, want the fake's %q", i, got.Handle, handle)
			}
			got.Handle = ""
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("event %d = %+v, want %+v", i, got, st.want)
		}
	}
	select {
	case ev := <-r.events:
		t.Errorf("unexpected extra event %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}
