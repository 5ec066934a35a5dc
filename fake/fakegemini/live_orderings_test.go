package fakegemini

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"
)

// wireFrame is one server frame as a raw WebSocket client received it.
type wireFrame struct {
	at   time.Time
	raw  []byte
	msg  *genai.LiveServerMessage
	kind string // as describe names it
}

// readWire reads raw frames up to and including the first turnComplete.
func readWire(t *testing.T, conn *websocket.Conn) []wireFrame {
	t.Helper()
	var out []wireFrame
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read after %d frames: %v", len(out), err)
		}
		at := time.Now()
		var m genai.LiveServerMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("frame %s: %v", data, err)
		}
		if m.SetupComplete != nil {
			continue
		}
		out = append(out, wireFrame{at: at, raw: data, msg: &m, kind: describe([]*genai.LiveServerMessage{&m})})
		if isTurnComplete(&m) {
			return out
		}
	}
}

func kinds(frames []wireFrame) string {
	msgs := make([]*genai.LiveServerMessage, len(frames))
	for i, f := range frames {
		msgs[i] = f.msg
	}
	return describe(msgs)
}

// rawLive opens a raw Live connection to a strict server and sends setup.
func rawLive(t *testing.T, brain LiveBrain) (*Server, *websocket.Conn) {
	t.Helper()
	srv, base := startLive(t, brain)
	Strict(t, srv)
	conn := rawDial(t, base, "", map[string]string{"x-goog-api-key": "k"})
	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"models/m"}}`)); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return srv, conn
}

// TestToolCallBeforeTurnCompleteWireOrder shows ordering (a) frame by
// frame: the turn completes with the call still pending, the client
// answers after turnComplete, and the model then speaks a new turn.
func TestToolCallBeforeTurnCompleteWireOrder(t *testing.T) {
	brain := NewLiveScript()
	_, conn := rawLive(t, brain)
	s := takeSession(t, brain)
	ctx := testContext(t)
	short := func(d time.Duration) Speech {
		sp := Tone(d)
		sp.Chunk, sp.Speedup = 100*time.Millisecond, -1
		return sp
	}

	ids, err := s.CallMidTurn(ctx, short(200*time.Millisecond),
		[]Call{{Name: "create_ticket", Args: map[string]any{"title": "x"}}}, short(100*time.Millisecond), nil)
	if err != nil {
		t.Fatalf("CallMidTurn: %v", err)
	}
	frames := readWire(t, conn)
	if got, want := kinds(frames), "audio, audio, toolCall, audio, generationComplete, turnComplete"; got != want {
		t.Fatalf("wire order %q, want %q", got, want)
	}
	if fc := frames[2].msg.ToolCall.FunctionCalls; len(fc) != 1 || fc[0].ID != ids[0] || fc[0].Name != "create_ticket" {
		t.Fatalf("tool call %s, want create_ticket with id %q", frames[2].raw, ids[0])
	}

	// Only now, after turnComplete, does the client answer.
	resp := fmt.Sprintf(`{"toolResponse":{"functionResponses":[{"id":%q,"name":"create_ticket","response":{"output":"T-1"}}]}}`, ids[0])
	if err := conn.WriteMessage(websocket.TextMessage, []byte(resp)); err != nil {
		t.Fatalf("tool response: %v", err)
	}
	ev, err := s.AwaitToolResponse(ctx)
	if err != nil || len(ev.FunctionResponses) != 1 || ev.FunctionResponses[0].ID != ids[0] {
		t.Fatalf("brain got %+v, %v; want the answer to %s", ev, err, ids[0])
	}
	if _, err := s.Speak(ctx, short(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTurn(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(readWire(t, conn)), "audio, generationComplete, turnComplete"; got != want {
		t.Errorf("answer turn %q, want %q", got, want)
	}
}

// TestLiveToolTurnDrivesTheSDKThroughOrderingA runs the scripted brain
// against the real SDK: the toolCall arrives before turnComplete and the
// answer turn follows the client's response.
func TestLiveToolTurnDrivesTheSDKThroughOrderingA(t *testing.T) {
	brain := &LiveToolTurn{
		Call:   Call{Name: "create_ticket", Args: map[string]any{"title": "refund"}},
		Before: Speech{PCM: Tone(640 * time.Millisecond).PCM, Transcript: "Let me open a ticket.", Speedup: -1},
		After:  Speech{PCM: Tone(320 * time.Millisecond).PCM, Speedup: -1},
		Answer: Speech{PCM: Tone(320 * time.Millisecond).PCM, Transcript: "Done.", Speedup: -1},
	}
	srv, base := startLive(t, brain)
	Strict(t, srv)
	c := connectLive(t, base, nil)
	c.skipSetupComplete(t)
	if err := c.sess.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text("open a ticket")}); err != nil {
		t.Fatal(err)
	}
	first := c.until(t, isTurnComplete)
	want := "out:Let me , audio, out:open a ticket., audio, toolCall, audio, generationComplete, turnComplete"
	if got := describe(first); got != want {
		t.Fatalf("first turn %q, want %q", got, want)
	}
	call := first[4].ToolCall.FunctionCalls[0]
	if err := c.sess.SendToolResponse(genai.LiveToolResponseInput{FunctionResponses: []*genai.FunctionResponse{
		{ID: call.ID, Name: call.Name, Response: map[string]any{"output": "T-1"}}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(c.until(t, isTurnComplete)), "out:Done., audio, generationComplete, turnComplete"; got != want {
		t.Errorf("answer turn %q, want %q", got, want)
	}
}

// TestFasterThanRealTimeAudioWithTurnCompleteAtPlayoutEnd shows ordering
// (b): 1.28 s of audio in four 320 ms chunks sent 80 ms apart, then
// generationComplete at once and turnComplete when the audio has played.
func TestFasterThanRealTimeAudioWithTurnCompleteAtPlayoutEnd(t *testing.T) {
	brain := NewLiveScript()
	_, conn := rawLive(t, brain)
	s := takeSession(t, brain)
	ctx := testContext(t)
	speech := Tone(1280 * time.Millisecond)

	done := make(chan error, 1)
	go func() {
		end, err := s.Speak(ctx, speech)
		if err == nil && time.Until(end) < 500*time.Millisecond {
			err = fmt.Errorf("Speak returned %v before the playout end, want it back after sending, well before", time.Until(end))
		}
		if err == nil {
			err = s.FinishTurn(ctx, nil)
		}
		done <- err
	}()
	frames := readWire(t, conn)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(frames), "audio, audio, audio, audio, generationComplete, turnComplete"; got != want {
		t.Fatalf("wire order %q, want %q", got, want)
	}
	for i, f := range frames[:4] {
		if n := len(f.msg.ServerContent.ModelTurn.Parts[0].InlineData.Data); n != 15360 {
			t.Errorf("chunk %d has %d bytes, want 320 ms of 24 kHz PCM16 (15360)", i, n)
		}
	}
	// Lower bounds only (the fake waits; a loaded machine may add delay):
	// the chunks were paced, and turnComplete waited for the playout.
	const slack = 60 * time.Millisecond
	if gap := frames[3].at.Sub(frames[0].at); gap < 3*80*time.Millisecond-slack {
		t.Errorf("four chunks arrived within %v, want them paced 80 ms apart", gap)
	}
	if wait := frames[5].at.Sub(frames[0].at); wait < 1280*time.Millisecond-slack {
		t.Errorf("turnComplete came %v after the first audio, want it at the playout end (1.28 s)", wait)
	}
}

func TestSpeechQueuedBehindPlayingSpeechExtendsThePlayout(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	c := connectLive(t, base, nil)
	c.skipSetupComplete(t)
	s := takeSession(t, brain)
	fast := Speech{PCM: Tone(400 * time.Millisecond).PCM, Speedup: -1}
	first, err := s.Speak(context.Background(), fast)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Speak(context.Background(), fast)
	if err != nil {
		t.Fatal(err)
	}
	if d := second.Sub(first); d != 400*time.Millisecond {
		t.Errorf("second speech ends %v after the first, want 400 ms (it plays after it)", d)
	}
}
