package fakegemini

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"slices"
	"testing"

	"google.golang.org/genai"
)

func TestLiveSetupArrivesDecodedAndSetupCompleteIsEchoed(t *testing.T) {
	brain := NewLiveScript()
	srv, base := startLive(t, brain)
	c := connectLive(t, base, &genai.LiveConnectConfig{
		ResponseModalities: []genai.Modality{genai.ModalityAudio},
		SystemInstruction:  &genai.Content{Parts: []*genai.Part{{Text: "Be brief."}}},
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name: "kb_search", Description: "Search the knowledge base",
			ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}},
		}}}},
		SessionResumption:        &genai.SessionResumptionConfig{},
		InputAudioTranscription:  &genai.AudioTranscriptionConfig{},
		OutputAudioTranscription: &genai.AudioTranscriptionConfig{},
		ContextWindowCompression: &genai.ContextWindowCompressionConfig{
			TriggerTokens: genai.Ptr[int64](25000), SlidingWindow: &genai.SlidingWindow{TargetTokens: genai.Ptr[int64](12500)},
		},
	})
	if c.sess.SetupComplete == nil {
		t.Fatal("Connect returned without SetupComplete")
	}
	// The SDK buffers the setupComplete and returns it again from the
	// first Receive; a gateway must skip it.
	c.skipSetupComplete(t)

	s := takeSession(t, brain)
	su := s.Setup
	if su.Model != liveModel || s.APIVersion != "v1beta" || s.Header.Get("x-goog-api-key") != "k" {
		t.Errorf("model %q version %q key %q, want %q v1beta k", su.Model, s.APIVersion, s.Header.Get("x-goog-api-key"), liveModel)
	}
	if su.SystemInstruction == nil || len(su.SystemInstruction.Parts) != 1 || su.SystemInstruction.Parts[0].Text != "Be brief." {
		t.Errorf("system instruction = %+v", su.SystemInstruction)
	}
	decls := su.FunctionDeclarations()
	if len(decls) != 1 || decls[0].Name != "kb_search" || decls[0].ParametersJsonSchema == nil {
		t.Errorf("function declarations = %+v, want kb_search with its JSON schema", decls)
	}
	if su.SessionResumption == nil || su.ResumeHandle() != "" || s.Resumed {
		t.Errorf("session resumption = %+v resumed %v, want updates requested for a new session", su.SessionResumption, s.Resumed)
	}
	if su.InputAudioTranscription == nil || su.OutputAudioTranscription == nil {
		t.Error("transcription configs missing")
	}
	cw := su.ContextWindowCompression
	if cw == nil || cw.TriggerTokens == nil || *cw.TriggerTokens != 25000 || cw.SlidingWindow == nil ||
		cw.SlidingWindow.TargetTokens == nil || *cw.SlidingWindow.TargetTokens != 12500 {
		t.Errorf("context window compression = %+v, want trigger 25000 target 12500", cw)
	}
	if su.GenerationConfig == nil || !slices.Equal(su.GenerationConfig.ResponseModalities, []genai.Modality{genai.ModalityAudio}) {
		t.Errorf("generation config = %+v, want AUDIO out", su.GenerationConfig)
	}
	// The SDK sent the int64s as JSON strings; they still decoded.
	if frames := s.Frames(); len(frames) != 1 || !bytes.Contains(frames[0], []byte(`"triggerTokens":"25000"`)) {
		t.Errorf("recorded setup frame = %s, want the quoted triggerTokens", frames)
	}
	if !json.Valid(su.Raw) {
		t.Errorf("raw setup %q is not JSON", su.Raw)
	}
	if n := srv.LiveConnections(); n != 1 {
		t.Errorf("LiveConnections = %d, want 1", n)
	}
}

func TestLiveSetupAcceptsInt64sAsNumbersOrStrings(t *testing.T) {
	su, err := decodeSetup([]byte(`{"setup":{"model":"models/m","contextWindowCompression":{"triggerTokens":1000,"slidingWindow":{"targetTokens":"500"}}}}`), GeminiAPI)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	cw := su.ContextWindowCompression
	if *cw.TriggerTokens != 1000 || *cw.SlidingWindow.TargetTokens != 500 {
		t.Errorf("trigger %d target %d, want 1000 500", *cw.TriggerTokens, *cw.SlidingWindow.TargetTokens)
	}
	if _, err := decodeSetup([]byte(`{"setup":{"model":"models/m","contextWindowCompression":{"triggerTokens":"lots"}}}`), GeminiAPI); err == nil {
		t.Error("a non-numeric triggerTokens decoded")
	}
}

func TestLiveAudioReachesTheBrainUnchangedAndInOrder(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	c := connectLive(t, base, nil)
	s := takeSession(t, brain)

	chunks := make([][]byte, 40)
	for i := range chunks {
		chunks[i] = make([]byte, 320+2*i) // 10 ms and up, every chunk distinct
		_, _ = rand.Read(chunks[i])
		if err := c.sess.SendRealtimeInput(genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: "audio/pcm;rate=16000", Data: chunks[i]}}); err != nil {
			t.Fatalf("send chunk %d: %v", i, err)
		}
	}
	if err := c.sess.SendRealtimeInput(genai.LiveRealtimeInput{AudioStreamEnd: true}); err != nil {
		t.Fatalf("send audioStreamEnd: %v", err)
	}
	for i, want := range chunks {
		ev := nextEvent(t, s)
		if ev.Kind != EventAudio || ev.MIMEType != "audio/pcm;rate=16000" || !bytes.Equal(ev.Data, want) {
			t.Fatalf("event %d = %s %q (%d bytes), want chunk %d unchanged", i, ev.Kind, ev.MIMEType, len(ev.Data), i)
		}
	}
	if ev := nextEvent(t, s); ev.Kind != EventAudioStreamEnd {
		t.Fatalf("after the audio got %s, want audioStreamEnd", ev.Kind)
	}

	// The recorder holds the raw frames: setup, the chunks (standard
	// padded base64 inside), audioStreamEnd.
	frames := s.Frames()
	if len(frames) != 2+len(chunks) {
		t.Fatalf("recorded %d frames, want %d", len(frames), 2+len(chunks))
	}
	for i, want := range chunks {
		var m struct {
			RealtimeInput struct {
				Audio genai.Blob `json:"audio"`
			} `json:"realtimeInput"`
		}
		if err := json.Unmarshal(frames[1+i], &m); err != nil || !bytes.Equal(m.RealtimeInput.Audio.Data, want) {
			t.Fatalf("recorded frame %d does not carry chunk %d (err %v)", 1+i, i, err)
		}
	}
}

func TestLiveClientMessagesOfEveryKindReachTheBrain(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	c := connectLive(t, base, nil)
	s := takeSession(t, brain)

	steps := []struct {
		name  string
		send  func() error
		check func(ClientEvent) bool
	}{
		{"clientContent", func() error {
			return c.sess.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text("hello there")})
		}, func(ev ClientEvent) bool {
			return ev.Kind == EventClientContent && ev.TurnComplete && ev.UserText() == "hello there"
		}},
		{"clientContent seeding history", func() error {
			return c.sess.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text("earlier"), TurnComplete: genai.Ptr(false)})
		}, func(ev ClientEvent) bool { return ev.Kind == EventClientContent && !ev.TurnComplete }},
		{"realtime text", func() error {
			return c.sess.SendRealtimeInput(genai.LiveRealtimeInput{Text: "typed"})
		}, func(ev ClientEvent) bool {
			return ev.Kind == EventText && ev.Text == "typed" && ev.UserText() == "typed"
		}},
		{"activityStart", func() error {
			return c.sess.SendRealtimeInput(genai.LiveRealtimeInput{ActivityStart: &genai.ActivityStart{}})
		}, func(ev ClientEvent) bool { return ev.Kind == EventActivityStart }},
		{"activityEnd", func() error {
			return c.sess.SendRealtimeInput(genai.LiveRealtimeInput{ActivityEnd: &genai.ActivityEnd{}})
		}, func(ev ClientEvent) bool { return ev.Kind == EventActivityEnd }},
		{"video", func() error {
			return c.sess.SendRealtimeInput(genai.LiveRealtimeInput{Video: &genai.Blob{MIMEType: "image/jpeg", Data: []byte{0xff, 0xd8}}})
		}, func(ev ClientEvent) bool {
			return ev.Kind == EventVideo && ev.MIMEType == "image/jpeg" && bytes.Equal(ev.Data, []byte{0xff, 0xd8})
		}},
		{"tool response", func() error {
			return c.sess.SendToolResponse(genai.LiveToolResponseInput{FunctionResponses: []*genai.FunctionResponse{{
				ID: "function-call-7", Name: "kb_search", Response: map[string]any{"output": map[string]any{"results": []any{}}},
			}}})
		}, func(ev ClientEvent) bool {
			if ev.Kind != EventToolResponse || len(ev.FunctionResponses) != 1 {
				return false
			}
			fr := ev.FunctionResponses[0]
			out, _ := fr.Response["output"].(map[string]any)
			return fr.ID == "function-call-7" && fr.Name == "kb_search" && out != nil
		}},
	}
	for _, st := range steps {
		if err := st.send(); err != nil {
			t.Fatalf("%s: send: %v", st.name, err)
		}
		if ev := nextEvent(t, s); !st.check(ev) {
			t.Errorf("%s: brain got %+v", st.name, ev)
		}
	}
}
