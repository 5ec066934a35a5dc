package session

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/textturn"
	"github.com/turnstile-gw/turnstile/session/voice"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/timeline"
	"github.com/turnstile-gw/turnstile/transport"
)

// textConfig is what this session's text turns run with.
func (c *conn) textConfig() textturn.Config {
	cfg := c.m.cfg
	return textturn.Config{System: c.ts.text.system + c.instruction(), Tools: c.ts.text.decls, Provider: cfg.TextProvider,
		GenAIProvider: cfg.GenAIProvider, Model: cfg.ModelName,
		MaxToolIterations: cfg.MaxToolIterations, ModelTimeout: cfg.ModelTimeout,
		RestrictOutput: cfg.RestrictOutput, RestrictionMessage: cfg.RestrictionMessage,
		RestrictionMaxInjections: cfg.RestrictionMaxInjections}
}

// voiceConfig is what this session's voice side runs with.
func (c *conn) voiceConfig() voice.Config {
	system := c.ts.voice.system
	if c.id.Prompt != "" {
		system += "\n\n" + c.id.Prompt
	}
	system += c.instruction()
	return voice.Config{System: system, Tools: c.ts.voice.decls, ConnectTimeout: c.m.cfg.LiveConnectTimeout,
		Voice: c.liveVoice(), LanguageCode: c.asks.lang()}
}

// textHost is the connection as one text turn sees it. ignored collects
// the intents the turn's tools returned that text cannot apply, for
// turn.done.
type textHost struct {
	c       *conn
	ignored *[]protocol.IgnoredIntent
}

var _ textturn.Host = textHost{}

func (h textHost) Send(ev protocol.Event)                  { h.c.send(ev) }
func (h textHost) History() []transport.Entry              { return h.c.contextHistory(h.c.ts.text) }
func (h textHost) ToolEvents(turn int) orchestrator.Events { return turnEvents{c: h.c, turn: turn} }

func (h textHost) Commit(entries []transport.Entry) {
	for _, e := range entries {
		if e.Role == transport.RoleModel {
			h.c.tl.Answer(e.Turn, e.Text)
		}
	}
	h.c.pst.appendEntries(h.c.st.append(entries), entries...)
}

func (h textHost) Apply(turn int, ins []intents.Intent) {
	intents.Apply(ins, textTarget{h.c}, func(in intents.Intent, applied bool) {
		why, voiceOnly := textIgnores[in.Type]
		if applied || !voiceOnly {
			h.c.intentApplied(turn, in.Type, applied)
			return
		}
		h.c.log().Info("intent ignored: voice only", "turn", turn, "intent", string(in.Type), "why", why)
		if h.ignored != nil {
			*h.ignored = append(*h.ignored, protocol.IgnoredIntent{Type: string(in.Type), Reason: why})
		}
	})
}

// textIgnores are the voice-only intents, with why a text turn does not
// apply them (said in turn.done and the log).
var textIgnores = map[intents.Type]string{
	intents.SuppressAudio:      "voice only: a text turn has no audio to suppress",
	intents.SuppressTranscript: "voice only: a text turn has no transcript to suppress",
	intents.EndVoiceSession:    "voice only: the session is not in voice",
}

// textTarget applies intents in text mode.
type textTarget struct{ c *conn }

func (t textTarget) BlockUser(d time.Duration, reason string) bool {
	t.c.block(d, reason)
	return true
}

func (t textTarget) SetPendingMessage(msg string) bool {
	t.c.st.update(func(rec *store.Record) { rec.PendingMessage = msg })
	return true
}

// StartVoiceSession switches to voice when the text turn ends.
func (t textTarget) StartVoiceSession() bool {
	if t.c.m.Live == nil {
		t.c.send(protocol.NewError(protocol.CodeUnsupported,
			"voice is not available on this gateway; the conversation stays in text", false, 0))
		return false
	}
	return t.c.act.requestVoice("start_voice_session")
}

// HandOff hands the conversation to a person; the model's closing text
// still ends this turn.
func (t textTarget) HandOff(reason, summary string) bool {
	t.c.handOff(t.c.st.record().Turn, reason, summary)
	return true
}

// The voice-only intents: a text turn has no audio or transcript.
func (textTarget) EndVoiceSession() bool    { return false }
func (textTarget) SuppressAudio() bool      { return false }
func (textTarget) SuppressTranscript() bool { return false }

// voiceHost is the connection as its voice side sees it.
type voiceHost struct{ c *conn }

var _ voice.Host = voiceHost{}

func (h voiceHost) Send(ev protocol.Event) { h.c.send(ev) }
func (h voiceHost) SendAudio(pcm []byte, received time.Time) bool {
	return h.c.sendAudio(pcm, received)
}
func (h voiceHost) DropAudio()                               { h.c.q.dropAudio() }
func (h voiceHost) AudioDrained() <-chan struct{}            { return h.c.q.audioDrained() }
func (h voiceHost) ToolEvents(turn int) orchestrator.Events  { return turnEvents{c: h.c, turn: turn} }
func (h voiceHost) History() []transport.Entry               { return h.c.contextHistory(h.c.ts.voice) }
func (h voiceHost) TakePending() string                      { return h.c.st.takePending() }
func (h voiceHost) Ended(reason string)                      { h.c.act.voiceEnded(reason) }
func (h voiceHost) BlockUser(d time.Duration, reason string) { h.c.block(d, reason) }
func (h voiceHost) HandOff(turn int, reason, summary string) { h.c.handOff(turn, reason, summary) }

func (h voiceHost) BeginTurn() int {
	n, _ := h.c.st.beginTurn(nil, false)
	h.c.tl.Begin(n, string(protocol.ModeVoice), "", "")
	return n
}

func (h voiceHost) SetPendingMessage(msg string) {
	h.c.st.update(func(rec *store.Record) { rec.PendingMessage = msg })
}

func (h voiceHost) IntentApplied(turn int, typ intents.Type, applied bool) {
	h.c.intentApplied(turn, typ, applied)
}

// SaveHandle stores the newest resumption handle, off the audio path.
func (h voiceHost) SaveHandle(handle string) {
	c := h.c
	c.st.update(func(rec *store.Record) { rec.ResumeHandle = handle })
	c.pst.saveHandle()
}

func (h voiceHost) Lost(err error) {
	c := h.c
	c.log().Error("voice: upstream lost", "err", err)
	c.m.Metrics.Upstream(metrics.LiveError, metrics.UpstreamCodeLost)
	c.send(protocol.NewError(protocol.CodeUpstreamLost, "the voice connection to the model could not be restored", true, 0))
	c.close(protocol.DisconnectUpstreamLost)
}

// intentApplied logs and counts an intent.
func (c *conn) intentApplied(turn int, typ intents.Type, applied bool) {
	if applied {
		c.m.Metrics.IntentApplied(typ)
		c.log().Info("intent applied", "turn", turn, "intent", typ)
		return
	}
	c.log().Info("intent not applicable in this mode", "turn", turn, "intent", typ, "mode", c.st.mode())
}

// setMode records a mode change, counts it, tells the browser and stores
// it.
func (c *conn) setMode(mode protocol.Mode, reason string) {
	var old protocol.Mode
	c.st.update(func(rec *store.Record) { old, rec.Mode = rec.Mode, mode })
	if old != mode {
		c.m.Metrics.SessionMode(old, mode, c.id.Channel)
	}
	c.event(timeline.Event{Event: timeline.EventMode, Mode: string(mode), Reason: reason})
	c.send(protocol.ModeChange{Mode: mode, Reason: reason, Tools: c.ts.mode(mode).listed})
	c.persistMode()
}

// persistMode stores the session's record (its mode) off the caller's path.
func (c *conn) persistMode() {
	c.pst.writeAsync(func(ctx context.Context, rec store.Record) error { return c.m.Store.Append(ctx, rec) })
}

// persistBegin writes a turn's user entry, reads the user's block and
// counts the turn against lim in one round trip. When Redis is unreachable
// the session goes on from memory (the turn is allowed), and the next
// write rewrites everything.
func (c *conn) persistBegin(user transport.Entry, lim store.TurnLimit) store.TurnStart {
	ts := store.TurnStart{Allowed: true}
	mark := c.st.appendMark() // the user entry is in the history by now
	c.pst.write(func(ctx context.Context, rec store.Record) error {
		if c.pst.uncovered(mark, []transport.Entry{user}) == nil {
			return nil // a restore wrote it: allowed, as when a failed write is caught up
		}
		got, err := c.m.Store.BeginTurn(ctx, rec, user, lim)
		if err == nil {
			ts = got
		}
		return err
	})
	return ts
}

// contextHistory is the history a model request of mode m carries: the
// newest that keeps the whole request (system instruction, tool
// declarations, history) within ContextMaxTokens, the current turn always.
func (c *conn) contextHistory(m modePrompt) []transport.Entry {
	max := c.m.cfg.ContextMaxTokens
	if max <= 0 {
		_, h := splitGreeting(c.st.historyCopy()) // in the instruction instead
		return h
	}
	h, chars := c.st.historyAndChars()
	kept, dropped := fitContext(h, chars, max-m.tokens)
	if dropped {
		c.refused(limitContext, c.m.now())
	}
	_, kept = splitGreeting(kept)
	return kept
}

// setBlocked records a block on this connection, tells the browser, and
// in voice ends voice at once: from now on nothing the user says or types
// reaches the model.
func (c *conn) setBlocked(b store.Block) {
	if !c.st.setBlock(b) {
		return
	}
	c.send(protocol.Blocked{Until: b.Until.Format(time.RFC3339), Reason: b.Reason})
	c.act.blockVoice()
}

// observeRequest records a text model request's estimated size (system
// instruction, declarations and history) as the session's context.
func (c *conn) observeRequest(req transport.TextRequest) {
	c.stats.ObserveContext(c.ts.text.toolTokens + metrics.EstimateTokens(utf8.RuneCountInString(req.System)) +
		historyTokens(req.History))
}
