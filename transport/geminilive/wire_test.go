package geminilive_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

// recording is what a recorder saw of one connection.
type recording struct {
	path, apiKey, authorization string
	frames                      []frame
}

type frame struct {
	typ  websocket.MessageType
	data []byte
}

// startRecorder serves a Live endpoint that answers the setup and records
// every frame; a connection's recording is delivered when the client
// hangs up.
func startRecorder(t *testing.T) (addr string, recordings <-chan recording) {
	t.Helper()
	out := make(chan recording, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		c.SetReadLimit(1 << 20)
		rec := recording{path: r.URL.Path, apiKey: r.Header.Get("x-goog-api-key"), authorization: r.Header.Get("Authorization")}
		for {
			typ, data, err := c.Read(context.Background())
			if err != nil {
				out <- rec
				return
			}
			rec.frames = append(rec.frames, frame{typ, data})
			if len(rec.frames) == 1 {
				_ = c.Write(context.Background(), websocket.MessageBinary, []byte(`{"setupComplete":{}}`))
			}
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), out
}

// referenceConfig is the LiveConnectConfig the adapter handed the SDK
// before it spoke the wire itself: the reference for its setup.
func referenceConfig(opts geminilive.Options, cfg transport.LiveConfig) *genai.LiveConnectConfig {
	lc := &genai.LiveConnectConfig{
		ResponseModalities:       []genai.Modality{genai.ModalityAudio},
		InputAudioTranscription:  &genai.AudioTranscriptionConfig{},
		OutputAudioTranscription: &genai.AudioTranscriptionConfig{},
		SessionResumption:        &genai.SessionResumptionConfig{Handle: cfg.ResumeHandle},
		SystemInstruction:        geminitext.SystemInstruction(cfg.System),
		Tools:                    referenceTools(cfg.Tools),
	}
	if !opts.NoCompression {
		cw := &genai.ContextWindowCompressionConfig{SlidingWindow: &genai.SlidingWindow{}}
		if opts.TriggerTokens > 0 {
			cw.TriggerTokens = genai.Ptr(opts.TriggerTokens)
		}
		if opts.TargetTokens > 0 {
			cw.SlidingWindow.TargetTokens = genai.Ptr(opts.TargetTokens)
		}
		lc.ContextWindowCompression = cw
	}
	if opts.Voice != "" {
		lc.SpeechConfig = &genai.SpeechConfig{VoiceConfig: &genai.VoiceConfig{
			PrebuiltVoiceConfig: &genai.PrebuiltVoiceConfig{VoiceName: opts.Voice}}}
	}
	return lc
}

// referenceTools declares the tools with their Gemini-native schemas, which
// the tests' declarations (kb_search) all have.
func referenceTools(ts []transport.ToolDecl) []*genai.Tool {
	if len(ts) == 0 {
		return nil
	}
	var decls []*genai.FunctionDeclaration
	for _, d := range ts {
		if d.Name != kbSearch.Name {
			panic("referenceTools knows only kb_search")
		}
		decls = append(decls, &genai.FunctionDeclaration{Name: d.Name, Description: d.Description, Parameters: kbSearchSchema})
	}
	return []*genai.Tool{{FunctionDeclarations: decls}}
}

// referenceHistory is the seed the adapter sent through the SDK: user and
// model text only.
func referenceHistory(h []transport.Entry) []*genai.Content {
	var text []transport.Entry
	for _, e := range h {
		if e.Text != "" && (e.Role == transport.RoleUser || e.Role == transport.RoleModel) {
			text = append(text, transport.Entry{Role: e.Role, Text: e.Text})
		}
	}
	return geminitext.Contents(text)
}

func TestEveryClientMessageIsTheJSONTheSDKSends(t *testing.T) {
	t.Run("Gemini API", func(t *testing.T) {
		testClientMessagesMatchTheSDK(t, func(t *testing.T, addr string) *genai.Client {
			return newClient(t, addr)
		})
	})
	t.Run("Vertex AI", func(t *testing.T) {
		testClientMessagesMatchTheSDK(t, func(t *testing.T, addr string) *genai.Client {
			return newVertexClient(t, addr, staticToken("ya29.test"))
		})
	})
}

// testClientMessagesMatchTheSDK connects through the SDK and through the
// adapter, both on the client newClient returns for the recorder's
// address, sends the same messages, and compares what the recorder saw.
func testClientMessagesMatchTheSDK(t *testing.T, newClient func(t *testing.T, addr string) *genai.Client) {
	pcm := make([]byte, 640)
	for i := range pcm {
		pcm[i] = byte(i * 7)
	}
	results := []transport.FunctionResult{
		{ID: "fc-1", Name: "kb_search", Response: map[string]any{"output": map[string]any{"hits": []any{"refunds", 3.5}}}},
		{ID: "fc-2", Name: "kb_get", Response: map[string]any{"error": "not <found> & gone"}},
	}
	history := []transport.Entry{
		{Role: transport.RoleUser, Text: "how do refunds work?"},
		{Role: transport.RoleModel, Text: "Let me check.", Calls: []transport.FunctionCall{{ID: "fc-1", Name: "kb_search"}}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{{ID: "fc-1", Name: "kb_search"}}},
		{Role: transport.RoleModel, Text: "Five days."},
		{Role: transport.RoleUser, Text: "thanks <3"},
	}
	cases := []struct {
		name string
		opts geminilive.Options
		cfg  transport.LiveConfig
	}{
		{"every option, history seeded", geminilive.Options{Voice: "Kore", TriggerTokens: 25000, TargetTokens: 12500},
			transport.LiveConfig{System: "Be brief. <Really>", Tools: []transport.ToolDecl{kbSearch}, History: history}},
		{"defaults", geminilive.Options{}, transport.LiveConfig{}},
		{"resuming without compression", geminilive.Options{NoCompression: true, TriggerTokens: 9},
			transport.LiveConfig{ResumeHandle: "h-1", History: history, Tools: []transport.ToolDecl{kbSearch}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, recs := startRecorder(t)
			client := newClient(t, addr) // also clears the SDK's env
			m := geminilive.New(client, testModel, tc.opts)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()

			// The SDK, as the adapter used it.
			sdk, err := client.Live.Connect(ctx, testModel, referenceConfig(tc.opts, tc.cfg))
			must(t, err)
			if seed := referenceHistory(tc.cfg.History); tc.cfg.ResumeHandle == "" && len(seed) > 0 {
				must(t, sdk.SendClientContent(genai.LiveClientContentInput{Turns: seed, TurnComplete: genai.Ptr(false)}))
			}
			must(t, sdk.SendRealtimeInput(genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: "audio/pcm;rate=16000", Data: pcm}}))
			must(t, sdk.SendRealtimeInput(genai.LiveRealtimeInput{AudioStreamEnd: true}))
			must(t, sdk.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text("where is <my> order?"), TurnComplete: genai.Ptr(true)}))
			must(t, sdk.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text("The user confirmed."), TurnComplete: genai.Ptr(false)}))
			frs := make([]*genai.FunctionResponse, len(results))
			for i, r := range results {
				frs[i] = &genai.FunctionResponse{ID: r.ID, Name: r.Name, Response: r.Response}
			}
			must(t, sdk.SendToolResponse(genai.LiveToolResponseInput{FunctionResponses: frs}))
			must(t, sdk.Close())
			want := <-recs

			// The adapter.
			s, err := m.Connect(ctx, tc.cfg)
			must(t, err)
			must(t, s.SendAudio(pcm))
			must(t, s.SendAudioEnd())
			must(t, s.SendText("where is <my> order?"))
			must(t, s.SendContext("The user confirmed."))
			must(t, s.SendToolResponses(results))
			must(t, s.Close())
			got := <-recs

			if got.path != want.path || got.apiKey != want.apiKey || got.authorization != want.authorization {
				t.Errorf("dialled %s with key %q and authorization %q, the SDK %s with key %q and authorization %q",
					got.path, got.apiKey, got.authorization, want.path, want.apiKey, want.authorization)
			}
			if len(got.frames) != len(want.frames) {
				t.Fatalf("the adapter sent %d frames, the SDK %d", len(got.frames), len(want.frames))
			}
			for i, g := range got.frames {
				w := want.frames[i]
				var gv, wv any
				must(t, json.Unmarshal(g.data, &gv))
				must(t, json.Unmarshal(w.data, &wv))
				if g.typ != w.typ || !reflect.DeepEqual(gv, wv) {
					t.Errorf("frame %d:\nadapter %v %s\nSDK     %v %s", i, g.typ, g.data, w.typ, w.data)
				}
			}
		})
	}
}
