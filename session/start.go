package session

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// begin acts on session.start, on the conversation's goroutine: the
// store's round trips of a start or a resume do not hold up the reader,
// which answers pings meanwhile. A start that fails has closed the
// connection (or its context ended).
func (s *session) begin(msg protocol.ClientMessage) {
	defer s.starting.Done()
	if s.ctx.Err() != nil {
		return
	}
	if !s.start(msg) && !s.closing() {
		s.out.abort() // nothing to tell the browser: end the connection
	}
}

// afterStart waits until session.start has been acted on, and reports
// whether the session started. The reader calls it before what it read
// that must come after the start — microphone audio, audio.end, auth,
// another session.start, and a ping once session.ready is out — which
// wait for it as they did when the reader started the session itself. A
// ping read before session.ready is answered at once (the store may be
// slow), and the conversation's inputs wait behind the start in the inbox.
func (s *session) afterStart() bool {
	s.starting.Wait()
	return s.started.Load()
}

func (s *session) start(msg protocol.ClientMessage) bool {
	if ok, alive := s.checkBlock(); !alive {
		return ok
	}
	wantVoice, handle := false, ""
	s.ts = s.m.currentToolset()
	if msg.Traceparent != "" && s.m.Tracing != nil {
		if l := tracing.Link(msg.Traceparent); l.IsValid() {
			s.traceLink = &l
		}
	}
	ready := protocol.SessionReady{
		Mode:            protocol.ModeText,
		RegistryVersion: s.ts.reg.Version(),
		Tools:           s.ts.text.listed,
		Model:           protocol.ModelInfo{Name: s.m.cfg.ModelName, Offline: s.m.cfg.Offline},
		Notice:          s.m.offlineNote,
	}
	var rec store.Record
	if msg.Resume != nil {
		counted, ok := s.allowResume(msg.Resume.SessionID)
		if !ok {
			return false
		}
		var hist []transport.Entry
		var err error
		rec, hist, err = s.resume(msg.Resume)
		switch {
		case s.ctx.Err() != nil || s.closing():
			// Another resume of the session took over while this one
			// started (4005), or the connection went away: not a store
			// failure.
			return false
		case errors.Is(err, store.ErrResumeRefused) && s.notRestoredYet(msg.Resume.SessionID):
			s.refundResume(msg.Resume.SessionID, counted)
			return false
		case errors.Is(err, store.ErrResumeRefused):
			s.m.Metrics.ResumeRefused.Inc()
			s.m.Metrics.RefuseSession("resume_refused", s.id.Channel)
			s.log().Info("resume refused", "session", msg.Resume.SessionID)
			s.send(protocol.NewError(protocol.CodeResumeRefused,
				"this session cannot be resumed; start a new one", false, 0))
			s.close(protocol.DisconnectResumeRefused)
			return false
		case err != nil:
			s.refundResume(msg.Resume.SessionID, counted)
			return s.storeDown(err)
		}
		wantVoice, handle = rec.Mode == protocol.ModeVoice, rec.ResumeHandle
		s.asks = asksOf(rec)
		s.asks.profile = s.resumedProfile(rec.Profile)
		rec.Mode = protocol.ModeText // until the upstream is up again
		if rec.RegistryVersion != ready.RegistryVersion {
			s.log().Warn("resumed session moves to another tool registry version",
				"session", rec.ID, "was", rec.RegistryVersion, "now", ready.RegistryVersion)
			ready.RegistryChanged = true
			rec.RegistryVersion = ready.RegistryVersion
			s.pst.markDirty() // the next write rewrites the record with the new version
		}
		s.st.load(rec, hist)
		ready.SessionID, ready.ResumeToken, ready.Resumed = rec.ID, msg.Resume.ResumeToken, true
		ready.Turn = rec.Turn
		s.m.Metrics.SessionStarted(metrics.SessionResumed, s.id.Channel)
	} else {
		profile, r := s.m.checkAsks(msg, *s.id)
		if r != nil {
			s.refuseStart(r)
			return false
		}
		if !s.allowNewSession() {
			return false
		}
		s.asks = sessionAsks{context: string(msg.Context), voice: msg.Voice, language: msg.LanguageCode, profile: profile}
		var token string
		var err error
		ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
		rec, token, err = s.m.Store.Create(ctx, store.Record{ID: newSessionID(), UserID: s.id.User, Mode: protocol.ModeText,
			RegistryVersion: ready.RegistryVersion, CreatedAt: s.m.now(),
			Context: s.asks.context, Voice: s.asks.voice, LanguageCode: s.asks.language, Profile: s.asks.profileName()})
		cancel()
		if s.ctx.Err() != nil {
			return false
		}
		if err != nil {
			return s.storeDown(err)
		}
		s.m.claim(rec.ID, s)
		s.st.load(rec, nil)
		ready.SessionID, ready.ResumeToken = rec.ID, token
		s.m.Metrics.SessionStarted(metrics.SessionNew, s.id.Channel)
	}
	if !s.owned(rec.Epoch) {
		return false // a newer resume was announced meanwhile
	}
	if s.asks.profile != nil {
		s.ts = s.m.toolsetFor(s.asks.profile)
		ready.Tools = s.ts.text.listed
	}
	s.out.named(ready.SessionID)
	s.stats = s.m.Metrics.OpenSession()
	s.convEpoch = rec.Epoch
	if ready.Resumed {
		ready.PendingConfirmations = s.pendingConfirmations()
	}
	s.out.alive(clock.Wall.Now())
	// After convEpoch: the conversation may be opened, and the timeline
	// kept, once started.
	// Before session.ready: a ping read after it waits for the rest of the
	// start (handle).
	s.started.Store(true)
	s.sendReady(ready)
	if !ready.Resumed {
		s.greet() // a resumed session was greeted when it started
	}
	s.m.kickPresence(s.st.record().ID)
	s.m.Metrics.SessionLive(s.id.Channel)
	s.log().Info("session ready", "channel", s.id.Channel, "user", s.id.User, "resumed", ready.Resumed, "turn", ready.Turn,
		"profile", s.asks.profileName(),
		"init_tokens_estimate", s.ts.text.tokens)
	if h := s.st.record().Handoff; h.Active() {
		s.sendHandoff(0, h) // a person still has the conversation
	}
	switch {
	case wantVoice:
		s.act.startVoice("resume", handle)
	case msg.Mode == protocol.ModeVoice:
		s.act.requestVoice("session.start")
	}
	return true
}

// sendReady sends session.ready with as much of the newest history as
// ResumeHistoryMax allows and half the send queue holds, whole turns only;
// historyTruncated says that older entries exist.
func (s *session) sendReady(ready protocol.SessionReady) {
	items := historyItems(s.st.historyCopy())
	if len(items) == 0 || !ready.Resumed {
		s.send(ready)
		return
	}
	bare, err := protocol.Encode(ready)
	if err != nil {
		s.log().Error("cannot encode event", "err", err)
		return
	}
	budget := min(s.m.cfg.SendQueueBytes/2, s.out.free()) - len(bare) - historyOverhead
	ready.History, ready.HistoryTruncated = newestTurns(items, max(s.m.cfg.ResumeHistoryMax, 0), max(budget, 0))
	if ready.HistoryTruncated ||
		slices.ContainsFunc(ready.History, func(it protocol.HistoryItem) bool { return it.Truncated }) {
		s.refused(limitResumeHistory, s.m.now())
	}
	s.send(ready)
}

// resume takes the session over: on this node first (the connection that
// holds it here ends, and its last writes land), then in the store, which
// makes this connection the owner (a new epoch) and tells every node. Two
// resumes of one session on this node take it one after the other.
func (s *session) resume(r *protocol.Resume) (store.Record, []transport.Entry, error) {
	unlock, ok := s.m.lockSession(s.ctx, r.SessionID, s)
	if !ok {
		return store.Record{}, nil, s.ctx.Err()
	}
	defer unlock()
	if h := s.m.holder(r.SessionID); h != nil && h != s && h.owns(r.ResumeToken, s.id.User) {
		s.m.claim(r.SessionID, s)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	rec, hist, err := s.m.Store.Resume(ctx, r.SessionID, r.ResumeToken, s.id.User)
	cancel()
	if err != nil {
		return rec, hist, err
	}
	// A holder here that the token did not match by its digest (it had not
	// finished starting) is taken over now; its writes are fenced already.
	s.m.claim(rec.ID, s)
	return rec, hist, nil
}

// notRestoredYet answers a resume the store refused while Redis may still
// be getting its sessions back (Manager.restoring): the browser is told to
// reconnect and resume in a moment (4103) instead of giving the session up
// (4004). When the store cannot say (right after a restart a pooled
// connection may still point at the old process), it is a store failure:
// 4103 too, never a refusal. It reports whether it answered.
func (s *session) notRestoredYet(id string) bool {
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	defer cancel()
	restoring, err := s.m.restoring(ctx)
	if err != nil {
		s.storeDown(err)
		return true
	}
	if !restoring {
		return false
	}
	s.log().Info("resume of a session the store lost and has not got back yet; told to retry", "session", id)
	s.refuseForStore("restoring", protocol.DisconnectRestoring,
		"the session store restarted and this session is being restored; reconnect and resume in a moment")
	return true
}

// storeDown refuses the session because the store could not be reached;
// it reports false, the handshake's result.
func (s *session) storeDown(err error) bool {
	s.log().Error("session store unavailable; refusing the session", "err", err)
	s.refuseForStore("store_unavailable", protocol.DisconnectStoreUnavailable,
		"session state is unavailable right now; try again shortly")
	return false
}

// refuseForStore refuses a session the store cannot serve now: counted
// under reason, the browser told to retry (store_unavailable, retryable,
// with msg) and closed with d, a reconnect-and-resume code.
func (s *session) refuseForStore(reason string, d protocol.Disconnect, msg string) {
	s.m.Metrics.RefuseSession(reason, s.id.Channel)
	s.send(protocol.NewError(protocol.CodeStoreUnavailable, msg, true, 0))
	s.close(d)
}

// checkBlock refuses a blocked user's new connection with 4003. It reports
// (handshake result, go on).
func (s *session) checkBlock() (bool, bool) {
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	defer cancel()
	b, err := s.m.Store.BlockOf(ctx, s.id.User)
	if err != nil {
		if s.ctx.Err() != nil {
			return false, false
		}
		return s.storeDown(err), false
	}
	s.st.setBlock(b)
	if until := b.Until.UTC().Format(time.RFC3339); b.Until.After(s.m.now()) {
		s.m.Metrics.RefuseSession("blocked", s.id.Channel)
		s.send(protocol.Blocked{Until: until, Reason: b.Reason})
		s.close(protocol.DisconnectBlocked)
		return false, false
	}
	return true, true
}
