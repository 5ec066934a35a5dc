package fakegemini

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakedemo"
)

// LiveDemo is the offline default's Live model. It hears speech by energy
// (RMS over 10 ms frames of the 16 kHz input: speech starts after ~100 ms
// above the threshold and ends after ~600 ms of silence or at
// audioStreamEnd), sends "(speech)" input transcripts while the user
// speaks, and at the end of the speech "speaks" a short sine melody at
// real-time pace with an output transcript, then generationComplete,
// turnComplete (with usage) and a sessionResumptionUpdate. Speech over the
// model's reply interrupts it (interrupted, then turnComplete). Typed text
// (clientContent or realtimeInput.text) that asks a question calls
// kb_search{query, limit: 3} and speaks an answer naming the first
// result's title; "stop", "bye" or "switch to text" calls
// end_voice_session{}; "/call NAME {json args}" calls any declared tool and
// speaks a summary of its result (the shared demo rules of package
// fakedemo). Transcripts are sent only when the setup enabled them,
// resumption updates only when it asked for them. Everything it says
// depends only on what it receives.
type LiveDemo struct {
	// Chunk is how much audio each streamed chunk holds; one is sent per
	// Chunk of wall time. Zero means 40 ms.
	Chunk time.Duration
}

// NewLiveDemo returns the demo Live model streaming 40 ms chunks.
func NewLiveDemo() *LiveDemo { return &LiveDemo{} }

// liveDemoState is what the demo keeps for session resumption.
type liveDemoState struct {
	Turns int // completed model turns
}

// ServeLive runs the demo on one connection.
func (d *LiveDemo) ServeLive(ctx context.Context, s *LiveSession) error {
	c := &demoConn{s: s, chunk: d.Chunk}
	if c.chunk <= 0 {
		c.chunk = liveChunk
	}
	c.mem, _ = s.State().(liveDemoState)
	err := c.run(ctx)
	if errors.Is(err, ErrLiveClosed) {
		return nil
	}
	return err
}

// demoConn is the demo's state on one connection; one goroutine owns it.
type demoConn struct {
	s     *LiveSession
	chunk time.Duration
	mem   liveDemoState

	vad     *energyDetector
	vadRate int

	turnOpen    bool                   // the model owes a turnComplete
	pending     map[string]pendingCall // by tool call id, awaiting a response
	made        []fakedemo.Call        // the calls of this connection, for an approval to repeat
	promptText  int                    // input of the current turn: typed text
	promptAudio int                    // and microphone audio, in tokens

	queue     []demoChunk // speech not yet sent
	sent      int         // chunks of the current reply already sent
	started   time.Time   // when the current reply's first chunk went out
	spokenDur time.Duration
	timer     *time.Timer
}

// maxRemembered bounds the calls a demo connection remembers for approvals.
const maxRemembered = 32

// pendingCall is a tool call the demo waits on; typed is true for a
// /call, whose result is summarised whatever the tool.
type pendingCall struct {
	name  string
	typed bool
}

type demoChunk struct {
	pcm        []byte
	transcript string
}

func (c *demoConn) run(ctx context.Context) error {
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	defer c.timer.Stop()
	for {
		var tick <-chan time.Time
		if len(c.queue) > 0 {
			tick = c.timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-c.s.Events():
			if !ok {
				return nil
			}
			if err := c.handle(ev); err != nil {
				return err
			}
		case <-tick:
			if err := c.speakNext(); err != nil {
				return err
			}
		}
	}
}

func (c *demoConn) handle(ev ClientEvent) error {
	switch ev.Kind {
	case EventAudio:
		if rate := pcmRate(ev.MIMEType); c.vad == nil || rate != c.vadRate {
			c.vad, c.vadRate = newEnergyDetector(rate), rate
		}
		c.promptAudio += audioTokens(time.Duration(len(ev.Data)/2) * time.Second / time.Duration(c.vadRate))
		for _, v := range c.vad.feed(ev.Data) {
			if err := c.onVAD(v); err != nil {
				return err
			}
		}
	case EventAudioStreamEnd:
		if c.vad != nil {
			if v, ok := c.vad.flush(); ok {
				return c.onVAD(v)
			}
		}
	case EventActivityStart:
		return c.onVAD(vadEvent{Kind: vadStart})
	case EventActivityEnd:
		return c.onVAD(vadEvent{Kind: vadEnd})
	case EventText:
		return c.onText(ev.Text)
	case EventClientContent:
		// Turns without turnComplete only seed the context.
		if text := strings.TrimSpace(ev.UserText()); ev.TurnComplete && text != "" {
			return c.onText(text)
		}
	case EventToolResponse:
		return c.onToolResponse(ev.FunctionResponses)
	}
	return nil
}

func (c *demoConn) onVAD(v vadEvent) error {
	switch v.Kind {
	case vadStart:
		if err := c.bargeIn(); err != nil {
			return err
		}
		return c.inputTranscript("(speech)")
	case vadTick:
		return c.inputTranscript(" (speech)")
	case vadEnd:
		if c.turnOpen { // manual activity end without a start, or a tool is pending
			return nil
		}
		heard := "some speech"
		if v.Speech > 0 {
			heard = fmt.Sprintf("%.1f seconds of speech", v.Speech.Seconds())
		}
		return c.speak(answerMelody, fmt.Sprintf("I heard %s, but I'm the offline demo model and can't understand "+
			"spoken words. Type a question and I'll look it up in the knowledge base.", heard))
	}
	return nil
}

func (c *demoConn) onText(text string) error {
	if err := c.bargeIn(); err != nil {
		return err
	}
	c.promptText += textTokens(text)
	if fakedemo.IsCall(text) || fakedemo.IsConfirmation(text) {
		a := fakedemo.Decide(fakedemo.Input{Text: text, Tools: declaredNames(c.s.Setup.Tools), Earlier: c.made})
		if len(a.Calls) == 0 {
			return c.speak(sorryMelody, a.Text)
		}
		return c.call(Call{Name: a.Calls[0].Name, Args: a.Calls[0].Args}, true)
	}
	switch {
	case wantsToEndVoice(text):
		return c.call(Call{Name: "end_voice_session", Args: map[string]any{}}, false)
	case looksLikeQuestion(text):
		return c.call(Call{Name: "kb_search", Args: map[string]any{"query": text, "limit": 3}}, false)
	}
	return c.speak(answerMelody, fmt.Sprintf("You said: %s. I'm the offline demo model: ask me a question and "+
		"I'll look it up in the knowledge base.", fakedemo.TruncateWords(text, 120)))
}

// call asks the client to run one tool and waits for its response; typed
// marks a /call.
func (c *demoConn) call(call Call, typed bool) error {
	c.turnOpen = true
	if len(c.made) == maxRemembered {
		c.made = append(c.made[:0], c.made[1:]...)
	}
	c.made = append(c.made, fakedemo.Call{Name: call.Name, Args: call.Args})
	ids, err := c.s.SendToolCall(call)
	if err != nil {
		return err
	}
	if c.pending == nil {
		c.pending = make(map[string]pendingCall)
	}
	c.pending[ids[0]] = pendingCall{name: call.Name, typed: typed}
	return nil
}

func (c *demoConn) onToolResponse(rs []*genai.FunctionResponse) error {
	for _, r := range rs {
		if r == nil {
			continue
		}
		p, ok := c.pending[r.ID]
		if !ok {
			continue // cancelled or unknown: the model has moved on
		}
		delete(c.pending, r.ID)
		msg, failed := fakedemo.Failure(r.Response)
		switch {
		case p.typed && failed:
			return c.speak(sorryMelody, fakedemo.Report(fakedemo.Result{Name: p.name, Response: r.Response}))
		case p.typed:
			return c.speak(answerMelody, fakedemo.Report(fakedemo.Result{Name: p.name, Response: r.Response}))
		case failed:
			return c.speak(sorryMelody, fmt.Sprintf("Sorry, the %s tool failed: %s", p.name, msg))
		}
		switch p.name {
		case "end_voice_session":
			return c.speak(answerMelody, "Okay, switching back to text. Talk to you there!")
		case "kb_search":
			title, found := firstResultTitle(r.Response["output"])
			if !found {
				return c.speak(sorryMelody, "I couldn't find anything about that in the knowledge base.")
			}
			return c.speak(answerMelody, fmt.Sprintf("I found “%s” in the knowledge base. It's the best match for your question.", title))
		}
	}
	return nil
}

// bargeIn stops whatever the model is doing: pending calls are withdrawn,
// queued speech is dropped, and the turn ends as interrupted.
func (c *demoConn) bargeIn() error {
	if !c.turnOpen {
		return nil
	}
	c.queue, c.turnOpen = nil, false
	c.timer.Stop()
	if len(c.pending) > 0 {
		ids := make([]string, 0, len(c.pending))
		for id := range c.pending {
			ids = append(ids, id)
		}
		c.pending = nil
		if err := c.s.SendToolCallCancellation(ids...); err != nil {
			return err
		}
	}
	if err := c.s.SendInterrupted(); err != nil {
		return err
	}
	return c.s.SendTurnComplete(nil)
}

// speak queues melody with text as its transcript, spread over the
// chunks, and sends the first chunk now.
func (c *demoConn) speak(melody []float64, text string) error {
	c.turnOpen = true
	if c.s.Setup.SessionResumption != nil {
		// The real service is not resumable while it generates.
		if _, err := c.s.SendResumptionUpdate(false); err != nil {
			return err
		}
	}
	chunks := chunkPCM(synthMelody(melody), c.chunk)
	c.queue = make([]demoChunk, len(chunks))
	transcripts := spreadText(text, len(chunks))
	for i, p := range chunks {
		c.queue[i] = demoChunk{pcm: p, transcript: transcripts[i]}
	}
	c.sent, c.started, c.spokenDur = 0, time.Now(), melodyDuration(melody)
	return c.speakNext()
}

// speakNext sends the next chunk and schedules the one after on the
// reply's own clock, so that the pace does not drift.
func (c *demoConn) speakNext() error {
	if len(c.queue) == 0 {
		return nil
	}
	next := c.queue[0]
	c.queue = c.queue[1:]
	c.sent++
	if next.transcript != "" && c.s.Setup.OutputAudioTranscription != nil {
		if err := c.s.SendOutputTranscript(next.transcript); err != nil {
			return err
		}
	}
	if err := c.s.SendAudio(next.pcm); err != nil {
		return err
	}
	if len(c.queue) > 0 {
		c.timer.Reset(time.Until(c.started.Add(time.Duration(c.sent) * c.chunk)))
		return nil
	}
	return c.finishTurn()
}

func (c *demoConn) finishTurn() error {
	c.turnOpen = false
	if err := c.s.SendGenerationComplete(); err != nil {
		return err
	}
	// As the real service: the prompt split into text (at least the
	// instruction's token) and audio, the response all audio.
	text, audio, out := int32(max(1, c.promptText)), int32(c.promptAudio), int32(audioTokens(c.spokenDur))
	c.promptText, c.promptAudio = 0, 0
	usage := &genai.UsageMetadata{
		PromptTokenCount: text + audio, ResponseTokenCount: out, TotalTokenCount: text + audio + out,
		PromptTokensDetails:   []*genai.ModalityTokenCount{{Modality: genai.MediaModalityText, TokenCount: text}},
		ResponseTokensDetails: []*genai.ModalityTokenCount{{Modality: genai.MediaModalityAudio, TokenCount: out}},
	}
	if audio > 0 {
		usage.PromptTokensDetails = append(usage.PromptTokensDetails, &genai.ModalityTokenCount{Modality: genai.MediaModalityAudio, TokenCount: audio})
	}
	if err := c.s.SendTurnComplete(usage); err != nil {
		return err
	}
	c.mem.Turns++
	c.s.SetState(c.mem)
	if c.s.Setup.SessionResumption != nil {
		if _, err := c.s.SendResumptionUpdate(true); err != nil {
			return err
		}
	}
	return nil
}

func (c *demoConn) inputTranscript(text string) error {
	if c.s.Setup.InputAudioTranscription == nil {
		return nil
	}
	return c.s.SendInputTranscript(text)
}

// audioTokens counts audio as Gemini does: 25 tokens per second.
func audioTokens(d time.Duration) int { return int(math.Ceil(d.Seconds() * 25)) }

func textTokens(s string) int { return (len(s) + 3) / 4 }

// plainTitle finds the first "title: ..." of the plain-text rendering the
// gateway gives audio models ("results: 1) title: Opening hours, id: ...").
var plainTitle = regexp.MustCompile(`title: (.+?)(?:, [a-z_ ]+: |; |\. |\.$|$)`)

// firstResultTitle reads the first kb_search result's title from a
// structured output ({"results":[{"title":...}]}) or a plain-text one.
func firstResultTitle(output any) (string, bool) {
	switch out := output.(type) {
	case map[string]any:
		results, _ := out["results"].([]any)
		if len(results) == 0 {
			return "", false
		}
		first, _ := results[0].(map[string]any)
		title, _ := first["title"].(string)
		if title == "" {
			title, _ = first["id"].(string)
		}
		return title, title != ""
	case string:
		if m := plainTitle.FindStringSubmatch(out); m != nil {
			return strings.TrimSpace(m[1]), true
		}
	}
	return "", false
}

var questionWords = map[string]bool{
	"what": true, "who": true, "where": true, "when": true, "why": true, "how": true, "which": true,
	"is": true, "are": true, "can": true, "could": true, "do": true, "does": true, "did": true,
	"will": true, "would": true, "should": true, "tell": true, "explain": true, "find": true, "search": true,
}

// looksLikeQuestion reports whether text asks something: it ends with "?"
// or starts with a question word.
func looksLikeQuestion(text string) bool {
	if strings.HasSuffix(strings.TrimSpace(text), "?") {
		return true
	}
	words := fakedemo.Words(text)
	return len(words) > 0 && questionWords[words[0]]
}

// wantsToEndVoice reports whether text asks to leave the voice session.
func wantsToEndVoice(text string) bool {
	words := fakedemo.Words(text)
	joined := " " + strings.Join(words, " ") + " "
	for _, w := range words {
		if w == "stop" || w == "bye" || w == "goodbye" {
			return true
		}
	}
	return strings.Contains(joined, " switch to text ") || strings.Contains(joined, " back to text ")
}
