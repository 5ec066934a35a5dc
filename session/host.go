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
func (s *session) textConfig() textturn.Config {
	cfg := s.m.cfg
	return textturn.Config{System: s.ts.text.system + s.instruction(), Tools: s.ts.text.decls, Provider: cfg.TextProvider,
		GenAIProvider: cfg.GenAIProvider, Model: cfg.ModelName,
		MaxToolIterations: cfg.MaxToolIterations, ModelTimeout: cfg.ModelTimeout,
		RestrictOutput: cfg.RestrictOutput, RestrictionMessage: cfg.RestrictionMessage,
		RestrictionMaxInjections: cfg.RestrictionMaxInjections}
}

// voiceConfig is what this session's voice side runs with.
func (s *session) voiceConfig() voice.Config {
	system := s.ts.voice.system
	if s.id.Prompt != "" {
		system += "\n\n" + s.id.Prompt
	}
	system += s.instruction()
	return voice.Config{System: system, Tools: s.ts.voice.decls, ConnectTimeout: s.m.cfg.LiveConnectTimeout,
		Voice: s.liveVoice(), LanguageCode: s.asks.lang(), Affinity: s.out.affinity()}
}

// textHost is the connection as one text turn sees it. ignored collects
// the intents the turn's tools returned that text cannot apply, for
// turn.done.
type textHost struct {
	s       *session
	ignored *[]protocol.IgnoredIntent
}

var _ textturn.Host = textHost{}

func (h textHost) Send(ev protocol.Event)                  { h.s.out.sendNow(ev) }
func (h textHost) History() []transport.Entry              { return h.s.contextHistory(h.s.ts.text) }
func (h textHost) ToolEvents(turn int) orchestrator.Events { return turnEvents{s: h.s, turn: turn} }

func (h textHost) Commit(entries []transport.Entry) {
	for _, e := range entries {
		if e.Role == transport.RoleModel {
			h.s.timeline().Answer(e.Turn, e.Text)
		}
	}
	h.s.pst.appendEntries(h.s.st.append(entries), entries...)
}

func (h textHost) Apply(turn int, ins []intents.Intent) {
	intents.Apply(ins, textTarget{h.s}, func(in intents.Intent, applied bool) {
		why, voiceOnly := textIgnores[in.Type]
		if applied || !voiceOnly {
			h.s.intentApplied(turn, in.Type, applied)
			return
		}
		h.s.log().Info("intent ignored: voice only", "turn", turn, "intent", string(in.Type), "why", why)
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
type textTarget struct{ s *session }

func (t textTarget) BlockUser(d time.Duration, reason string) bool {
	t.s.block(d, reason)
	return true
}

func (t textTarget) SetPendingMessage(msg string) bool {
	t.s.st.update(func(rec *store.Record) { rec.PendingMessage = msg })
	return true
}

// StartVoiceSession switches to voice when the text turn ends.
func (t textTarget) StartVoiceSession() bool {
	if t.s.m.Live == nil {
		t.s.send(protocol.NewError(protocol.CodeUnsupported,
			"voice is not available on this gateway; the conversation stays in text", false, 0))
		return false
	}
	return t.s.act.requestVoice("start_voice_session")
}

// HandOff hands the conversation to a person; the model's closing text
// still ends this turn.
func (t textTarget) HandOff(reason, summary string) bool {
	t.s.handOff(t.s.st.record().Turn, reason, summary)
	return true
}

// The voice-only intents: a text turn has no audio or transcript.
func (textTarget) EndVoiceSession() bool    { return false }
func (textTarget) SuppressAudio() bool      { return false }
func (textTarget) SuppressTranscript() bool { return false }

// voiceHost is the connection as its voice side sees it.
type voiceHost struct{ s *session }

var _ voice.Host = voiceHost{}

func (h voiceHost) Send(ev protocol.Event) { h.s.send(ev) }
func (h voiceHost) SendAudio(pcm []byte, received time.Time) bool {
	return h.s.out.sendAudio(pcm, received)
}
func (h voiceHost) AudioWontWait() bool                      { return h.s.out.audioWontWait() }
func (h voiceHost) DropAudio()                               { h.s.out.dropAudio() }
func (h voiceHost) AudioDrained() <-chan struct{}            { return h.s.out.audioDrained() }
func (h voiceHost) ToolEvents(turn int) orchestrator.Events  { return turnEvents{s: h.s, turn: turn} }
func (h voiceHost) History() []transport.Entry               { return h.s.contextHistory(h.s.ts.voice) }
func (h voiceHost) TakePending() string                      { return h.s.st.takePending() }
func (h voiceHost) Ended(reason string)                      { h.s.act.voiceEnded(reason) }
func (h voiceHost) BlockUser(d time.Duration, reason string) { h.s.block(d, reason) }
func (h voiceHost) HandOff(turn int, reason, summary string) { h.s.handOff(turn, reason, summary) }

func (h voiceHost) BeginTurn() int {
	n, _ := h.s.st.beginTurn(nil, false)
	h.s.timeline().Begin(n, string(protocol.ModeVoice), "", "")
	return n
}

func (h voiceHost) SetPendingMessage(msg string) {
	h.s.st.update(func(rec *store.Record) { rec.PendingMessage = msg })
}

func (h voiceHost) IntentApplied(turn int, typ intents.Type, applied bool) {
	h.s.intentApplied(turn, typ, applied)
}

// SaveHandle stores the newest resumption handle, off the audio path.
func (h voiceHost) SaveHandle(handle string) {
	s := h.s
	s.st.update(func(rec *store.Record) { rec.ResumeHandle = handle })
	s.pst.saveHandle()
}

func (h voiceHost) Lost(err error) {
	s := h.s
	s.log().Error("voice: upstream lost", "err", err)
	s.m.Metrics.Upstream(metrics.LiveError, metrics.UpstreamCodeLost)
	s.send(protocol.NewError(protocol.CodeUpstreamLost, "the voice connection to the model could not be restored", true, 0))
	s.close(protocol.DisconnectUpstreamLost)
}

// intentApplied logs and counts an intent.
func (s *session) intentApplied(turn int, typ intents.Type, applied bool) {
	if applied {
		s.m.Metrics.IntentApplied(typ)
		s.log().Info("intent applied", "turn", turn, "intent", typ)
		return
	}
	s.log().Info("intent not applicable in this mode", "turn", turn, "intent", typ, "mode", s.st.mode())
}

// setMode records a mode change, counts it, tells the browser and stores
// it.
func (s *session) setMode(mode protocol.Mode, reason string) {
	var old protocol.Mode
	s.st.update(func(rec *store.Record) { old, rec.Mode = rec.Mode, mode })
	if old != mode {
		s.m.Metrics.SessionMode(old, mode, s.id.Channel)
	}
	s.event(timeline.Event{Event: timeline.EventMode, Mode: string(mode), Reason: reason})
	s.send(protocol.ModeChange{Mode: mode, Reason: reason, Tools: s.ts.mode(mode).listed})
	s.persistMode()
}

// persistMode stores the session's record (its mode) off the caller's path.
func (s *session) persistMode() {
	s.pst.writeAsync(func(ctx context.Context, rec store.Record) error { return s.m.Store.Append(ctx, rec) })
}

// persistBegin writes a turn's user entry, reads the user's block and
// counts the turn against lim in one round trip. When Redis is unreachable
// the session goes on from memory (the turn is allowed), and the next
// write rewrites everything.
func (s *session) persistBegin(user transport.Entry, lim store.TurnLimit) store.TurnStart {
	ts := store.TurnStart{Allowed: true}
	mark := s.st.appendMark() // the user entry is in the history by now
	s.pst.write(func(ctx context.Context, rec store.Record) error {
		if s.pst.uncovered(mark, []transport.Entry{user}) == nil {
			return nil // a restore wrote it: allowed, as when a failed write is caught up
		}
		got, err := s.m.Store.BeginTurn(ctx, rec, user, lim)
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
func (s *session) contextHistory(m modePrompt) []transport.Entry {
	max := s.m.cfg.ContextMaxTokens
	if max <= 0 {
		_, h := splitGreeting(s.st.historyCopy()) // in the instruction instead
		return h
	}
	h, chars := s.st.historyAndChars()
	kept, dropped := fitContext(h, chars, max-m.tokens)
	if dropped {
		s.refused(limitContext, s.m.now())
	}
	_, kept = splitGreeting(kept)
	return kept
}

// setBlocked records a block on this connection, tells the browser, and
// in voice ends voice at once: from now on nothing the user says or types
// reaches the model.
func (s *session) setBlocked(b store.Block) {
	if !s.st.setBlock(b) {
		return
	}
	s.send(protocol.Blocked{Until: b.Until.Format(time.RFC3339), Reason: b.Reason})
	s.act.blockVoice()
}

// observeRequest records a text model request's estimated size (system
// instruction, declarations and history) as the session's context.
func (s *session) observeRequest(req transport.TextRequest) {
	s.stats.ObserveContext(s.ts.text.toolTokens + metrics.EstimateTokens(utf8.RuneCountInString(req.System)) +
		historyTokens(req.History))
}
