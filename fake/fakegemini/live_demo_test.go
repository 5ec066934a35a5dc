package fakegemini

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
)

// demoConfig is what the gateway asks for: both transcriptions and
// resumption updates.
var demoConfig = &genai.LiveConnectConfig{
	ResponseModalities:       []genai.Modality{genai.ModalityAudio},
	InputAudioTranscription:  &genai.AudioTranscriptionConfig{},
	OutputAudioTranscription: &genai.AudioTranscriptionConfig{},
	SessionResumption:        &genai.SessionResumptionConfig{},
}

// heard summarizes what the client received.
type heard struct {
	audio       []byte
	audioChunks int
	input       string
	output      string
	genComplete bool
	interrupted bool
}

func summarize(t *testing.T, msgs []*genai.LiveServerMessage) heard {
	t.Helper()
	var h heard
	for _, m := range msgs {
		sc := m.ServerContent
		if sc == nil {
			continue
		}
		if sc.ModelTurn != nil {
			for _, p := range sc.ModelTurn.Parts {
				if p.InlineData == nil || p.InlineData.MIMEType != "audio/pcm;rate=24000" {
					t.Fatalf("model turn part %+v is not 24 kHz PCM", p)
				}
				h.audio = append(h.audio, p.InlineData.Data...)
				h.audioChunks++
			}
		}
		if sc.InputTranscription != nil {
			h.input += sc.InputTranscription.Text
		}
		if sc.OutputTranscription != nil {
			h.output += sc.OutputTranscription.Text
		}
		h.genComplete = h.genComplete || sc.GenerationComplete
		h.interrupted = h.interrupted || sc.Interrupted
	}
	return h
}

func TestLiveDemoAnswersSpeechWithAMelodyAndATranscript(t *testing.T) {
	srv, base := startLive(t, NewLiveDemo())
	c := connectLive(t, base, demoConfig)
	c.skipSetupComplete(t)

	sendAudio(t, c, append(speech(time.Second), silence(time.Second)...))
	msgs := c.until(t, isTurnComplete)
	h := summarize(t, msgs)

	if !strings.HasPrefix(h.input, "(speech)") {
		t.Errorf("input transcript %q, want the (speech) placeholder", h.input)
	}
	if want := melodyDuration(answerMelody); pcmDuration(h.audio) != want || h.audioChunks != int(want/liveChunk) {
		t.Errorf("spoke %v in %d chunks, want %v in 40 ms chunks", pcmDuration(h.audio), h.audioChunks, want)
	}
	if !strings.Contains(h.output, "I heard 1.0 seconds of speech") {
		t.Errorf("output transcript %q, want it to say how long the user spoke", h.output)
	}
	if !h.genComplete || h.interrupted {
		t.Errorf("generationComplete %v interrupted %v, want a complete, uninterrupted turn", h.genComplete, h.interrupted)
	}
	if u := msgs[len(msgs)-1].UsageMetadata; u == nil || u.ResponseTokenCount != 24 || u.PromptTokenCount == 0 {
		t.Errorf("turn usage %+v, want 24 response tokens for 0.96 s of audio", u)
	}
	// Not resumable while speaking; resumable once the turn is over.
	if i := slices.IndexFunc(msgs, func(m *genai.LiveServerMessage) bool { return m.SessionResumptionUpdate != nil }); i < 0 ||
		msgs[i].SessionResumptionUpdate.Resumable {
		t.Errorf("want a non-resumable update while the model speaks")
	}
	upd := c.next(t).SessionResumptionUpdate
	if upd == nil || !upd.Resumable || upd.NewHandle == "" {
		t.Fatalf("after turnComplete got update %+v, want a resumable handle", upd)
	}
	if st, ok := srv.live.handles.lookup(upd.NewHandle); !ok || st != (liveDemoState{Turns: 1}) {
		t.Errorf("state under the handle = %#v, want one completed turn", st)
	}
}

func TestLiveDemoStopsSpeakingWhenTheUserBargesIn(t *testing.T) {
	_, base := startLive(t, NewLiveDemo())
	c := connectLive(t, base, demoConfig)
	c.skipSetupComplete(t)

	sendAudio(t, c, append(speech(500*time.Millisecond), silence(700*time.Millisecond)...))
	c.until(t, func(m *genai.LiveServerMessage) bool {
		return m.ServerContent != nil && m.ServerContent.ModelTurn != nil
	})
	sendAudio(t, c, speech(300*time.Millisecond)) // the user talks over the reply

	msgs := c.until(t, isTurnComplete)
	h := summarize(t, msgs)
	last := msgs[len(msgs)-1]
	if !h.interrupted || last.UsageMetadata != nil || h.genComplete {
		t.Fatalf("want interrupted then a bare turnComplete, got %s", describe(msgs))
	}
	if i := slices.IndexFunc(msgs, func(m *genai.LiveServerMessage) bool { return m.ServerContent != nil && m.ServerContent.Interrupted }); i != len(msgs)-2 {
		t.Errorf("interrupted at %d of %d messages, want just before turnComplete", i, len(msgs))
	}
	if got := pcmDuration(h.audio) + liveChunk; got >= melodyDuration(answerMelody) {
		t.Errorf("the interrupted reply still played %v", got)
	}

	// The new speech gets its own answer.
	sendAudio(t, c, silence(700*time.Millisecond))
	h = summarize(t, c.until(t, isTurnComplete))
	if !strings.HasPrefix(h.input, "(speech)") || pcmDuration(h.audio) != melodyDuration(answerMelody) || h.interrupted {
		t.Errorf("after the barge-in: input %q, %v of audio, interrupted %v", h.input, pcmDuration(h.audio), h.interrupted)
	}
}

func TestLiveDemoSpeechCancelsAPendingToolCall(t *testing.T) {
	_, base := startLive(t, NewLiveDemo())
	c := connectLive(t, base, demoConfig)
	c.skipSetupComplete(t)

	if err := c.sess.SendRealtimeInput(genai.LiveRealtimeInput{Text: "where is my order?"}); err != nil {
		t.Fatalf("send text: %v", err)
	}
	call := c.until(t, isToolCall)[0].ToolCall.FunctionCalls[0]
	sendAudio(t, c, speech(200*time.Millisecond))
	msgs := c.until(t, isTurnComplete)
	if msgs[0].ToolCallCancellation == nil || !slices.Equal(msgs[0].ToolCallCancellation.IDs, []string{call.ID}) {
		t.Fatalf("want the call %s cancelled first, got %s", call.ID, describe(msgs))
	}
	if !summarize(t, msgs).interrupted {
		t.Errorf("want interrupted before turnComplete, got %s", describe(msgs))
	}
}

func TestLiveDemoTypedInput(t *testing.T) {
	hours := map[string]any{"results": []any{
		map[string]any{"id": "hours", "title": "Opening hours", "snippet": "We are open 9 to 5."},
		map[string]any{"id": "parking", "title": "Parking"},
	}}
	cases := []struct {
		name     string
		send     func(*genai.Session) error
		call     string // the tool the demo calls, "" for none
		response map[string]any
		says     string
	}{
		{"question with structured results", typed("What are your opening hours?"), "kb_search",
			map[string]any{"output": hours}, "I found “Opening hours”"},
		{"question with plain-text results", typedRealtime("when are you open"), "kb_search",
			map[string]any{"output": "results: 1) title: Opening hours, id: hours, score: 1.25, snippet: We are open 9 to 5. 2) title: Parking, id: parking."},
			"I found “Opening hours”"},
		{"question without results", typed("Do you sell bikes?"), "kb_search",
			map[string]any{"output": map[string]any{"results": []any{}}}, "couldn't find anything"},
		{"failed search", typed("Do you sell bikes?"), "kb_search",
			map[string]any{"error": map[string]any{"type": "TIMEOUT", "message": "the search took too long"}},
			"Sorry, the kb_search tool failed: the search took too long"},
		{"switch to text", typedRealtime("please switch to text"), "end_voice_session",
			map[string]any{"output": "ok"}, "switching back to text"},
		{"bye", typed("Bye!"), "end_voice_session", map[string]any{"output": "ok"}, "switching back to text"},
		{"statement", typed("I like coffee."), "", nil, "You said: I like coffee."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := startLive(t, NewLiveDemo())
			c := connectLive(t, base, demoConfig)
			c.skipSetupComplete(t)
			if err := tc.send(c.sess); err != nil {
				t.Fatalf("send: %v", err)
			}
			if tc.call != "" {
				msgs := c.until(t, func(m *genai.LiveServerMessage) bool { return isToolCall(m) || isTurnComplete(m) })
				tcm := msgs[len(msgs)-1].ToolCall
				if tcm == nil || len(tcm.FunctionCalls) != 1 {
					t.Fatalf("want one tool call, got %s", describe(msgs))
				}
				fc := tcm.FunctionCalls[0]
				if fc.Name != tc.call || fc.ID == "" {
					t.Fatalf("call %s id %q, want %s with an id", fc.Name, fc.ID, tc.call)
				}
				if fc.Name == "kb_search" && (fc.Args["query"] == "" || fc.Args["limit"] != 3.0) {
					t.Errorf("kb_search args %v, want the question and limit 3", fc.Args)
				}
				if fc.Name == "end_voice_session" && len(fc.Args) != 0 {
					t.Errorf("end_voice_session args %v, want none", fc.Args)
				}
				err := c.sess.SendToolResponse(genai.LiveToolResponseInput{FunctionResponses: []*genai.FunctionResponse{{
					ID: fc.ID, Name: fc.Name, Response: tc.response,
				}}})
				if err != nil {
					t.Fatalf("send tool response: %v", err)
				}
			}
			h := summarize(t, c.until(t, isTurnComplete))
			if !strings.Contains(h.output, tc.says) || len(h.audio) == 0 || !h.genComplete {
				t.Errorf("spoke %v saying %q, want audio saying %q", pcmDuration(h.audio), h.output, tc.says)
			}
		})
	}
}

func typed(text string) func(*genai.Session) error {
	return func(s *genai.Session) error {
		return s.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text(text)})
	}
}

func typedRealtime(text string) func(*genai.Session) error {
	return func(s *genai.Session) error { return s.SendRealtimeInput(genai.LiveRealtimeInput{Text: text}) }
}

// describe lists what each message carries, for failure messages.
func describe(msgs []*genai.LiveServerMessage) string {
	var parts []string
	for _, m := range msgs {
		switch sc := m.ServerContent; {
		case m.ToolCall != nil:
			parts = append(parts, "toolCall")
		case m.ToolCallCancellation != nil:
			parts = append(parts, "toolCallCancellation")
		case m.SessionResumptionUpdate != nil:
			parts = append(parts, "resumptionUpdate")
		case sc == nil:
			parts = append(parts, "other")
		case sc.ModelTurn != nil:
			parts = append(parts, "audio")
		case sc.InputTranscription != nil:
			parts = append(parts, "in:"+sc.InputTranscription.Text)
		case sc.OutputTranscription != nil:
			parts = append(parts, "out:"+sc.OutputTranscription.Text)
		case sc.Interrupted:
			parts = append(parts, "interrupted")
		case sc.GenerationComplete:
			parts = append(parts, "generationComplete")
		case sc.TurnComplete:
			parts = append(parts, "turnComplete")
		default:
			parts = append(parts, "serverContent")
		}
	}
	return strings.Join(parts, ", ")
}

func TestEnergyDetectorFindsSpeechBoundaries(t *testing.T) {
	cases := []struct {
		name  string
		audio [][]byte
		flush bool
		want  []vadEvent
	}{
		{"silence", [][]byte{silence(2 * time.Second)}, false, nil},
		{"a 50 ms click is not speech", [][]byte{speech(50 * time.Millisecond), silence(time.Second)}, false, nil},
		{"speech then silence", [][]byte{speech(1500 * time.Millisecond), silence(time.Second)}, false,
			[]vadEvent{{Kind: vadStart}, {Kind: vadTick}, {Kind: vadEnd, Speech: 1500 * time.Millisecond}}},
		{"a short pause does not end speech", [][]byte{speech(300 * time.Millisecond), silence(400 * time.Millisecond),
			speech(300 * time.Millisecond), silence(700 * time.Millisecond)}, false,
			[]vadEvent{{Kind: vadStart}, {Kind: vadTick}, {Kind: vadEnd, Speech: time.Second}}},
		{"audioStreamEnd ends speech", [][]byte{speech(400 * time.Millisecond)}, true,
			[]vadEvent{{Kind: vadStart}, {Kind: vadEnd, Speech: 400 * time.Millisecond}}},
		{"odd-sized chunks", splitOdd(append(speech(500*time.Millisecond), silence(700*time.Millisecond)...)), false,
			[]vadEvent{{Kind: vadStart}, {Kind: vadEnd, Speech: 500 * time.Millisecond}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newEnergyDetector(16000)
			var got []vadEvent
			for _, a := range tc.audio {
				got = append(got, d.feed(a)...)
			}
			if tc.flush {
				if ev, ok := d.flush(); ok {
					got = append(got, ev)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %+v, want %+v", got, tc.want)
			}
		})
	}
}

// splitOdd cuts pcm into 333-byte pieces, splitting samples and frames.
func splitOdd(pcm []byte) [][]byte {
	var out [][]byte
	for len(pcm) > 0 {
		n := min(333, len(pcm))
		out = append(out, pcm[:n])
		pcm = pcm[n:]
	}
	return out
}

func TestFirstResultTitleReadsStructuredAndPlainOutput(t *testing.T) {
	cases := []struct {
		output any
		want   string
	}{
		{map[string]any{"results": []any{map[string]any{"title": "Opening hours"}}}, "Opening hours"},
		{map[string]any{"results": []any{map[string]any{"id": "hours"}}}, "hours"},
		{map[string]any{"results": []any{}}, ""},
		{"results: 1) title: Opening hours, id: hours, score: 1.25.", "Opening hours"},
		{"title: Opening hours. body: We are open. id: hours.", "Opening hours"},
		{"results: none.", ""},
		{nil, ""},
	}
	for _, tc := range cases {
		if got, ok := firstResultTitle(tc.output); got != tc.want || ok != (tc.want != "") {
			t.Errorf("firstResultTitle(%v) = %q %v, want %q", tc.output, got, ok, tc.want)
		}
	}
}
