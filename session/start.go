package session

import (
	"context"
	"errors"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// handshake reads session.start and hands it to the conversation's
// goroutine (inbox.go), which starts the session (begin) while the reader
// reads on; or it closes. It reports whether the reader goes on.
func (c *conn) handshake() bool {
	timer := clock.Wall.AfterFunc(c.m.cfg.HandshakeTimeout, func() { c.close(protocol.DisconnectHandshakeTimeout) })
	defer timer.Stop()
	binary, data, err := c.wire.Read(nil)
	if err != nil {
		c.out.setReason(readReason(err))
		return false
	}
	if !binary && !utf8.Valid(data) {
		c.invalidUTF8()
		return false
	}
	msg, derr := protocol.Decode(data, protocol.Limits{MaxTextChars: c.m.cfg.MaxTextChars})
	if binary || derr != nil || msg.Type != protocol.TypeSessionStart {
		c.m.Metrics.BrowserInvalid()
		why := "the first message must be session.start"
		var de *protocol.DecodeError
		if !binary && msg.Type == protocol.TypeSessionStart && errors.As(derr, &de) {
			why = de.Message // a session.start with a bad field: say which
		}
		c.send(protocol.NewError(protocol.CodeBadMessage, why, false, 0))
		c.close(protocol.DisconnectProtocolViolation)
		return false
	}
	c.m.Metrics.BrowserMessage(msg.Type)
	timer.Stop()
	c.starting.Add(1)
	c.enqueue(msg) // the first input: the ones read after it wait for it
	return true
}

// begin acts on session.start, on the conversation's goroutine: the
// store's round trips of a start or a resume do not hold up the reader,
// which answers pings meanwhile. A start that fails has closed the
// connection (or its context ended).
func (c *conn) begin(msg protocol.ClientMessage) {
	defer c.starting.Done()
	if c.ctx.Err() != nil {
		return
	}
	if !c.start(msg) && !c.closing() {
		c.cancel() // nothing to tell the browser: end the connection
	}
}

// afterStart waits until session.start has been acted on, and reports
// whether the session started. The reader calls it before what it read
// that must come after the start — microphone audio, audio.end, auth,
// another session.start, and a ping once session.ready is out — which
// wait for it as they did when the reader started the session itself. A
// ping read before session.ready is answered at once (the store may be
// slow), and the conversation's inputs wait behind the start in the inbox.
func (c *conn) afterStart() bool {
	c.starting.Wait()
	return c.started.Load()
}

func (c *conn) start(msg protocol.ClientMessage) bool {
	if ok, alive := c.checkBlock(); !alive {
		return ok
	}
	wantVoice, handle := false, ""
	c.ts = c.m.currentToolset()
	if msg.Traceparent != "" && c.m.Tracing != nil {
		c.traceLink = tracing.Link(msg.Traceparent)
	}
	ready := protocol.SessionReady{
		Mode:            protocol.ModeText,
		RegistryVersion: c.ts.reg.Version(),
		Tools:           c.ts.text.listed,
		Model:           protocol.ModelInfo{Name: c.m.cfg.ModelName, Offline: c.m.cfg.Offline},
		Notice:          c.m.offlineNote,
	}
	var rec store.Record
	if msg.Resume != nil {
		counted, ok := c.allowResume(msg.Resume.SessionID)
		if !ok {
			return false
		}
		var hist []transport.Entry
		var err error
		rec, hist, err = c.resume(msg.Resume)
		switch {
		case c.ctx.Err() != nil || c.closing():
			// Another resume of the session took over while this one
			// started (4005), or the connection went away: not a store
			// failure.
			return false
		case errors.Is(err, store.ErrResumeRefused) && c.notRestoredYet(msg.Resume.SessionID):
			c.refundResume(msg.Resume.SessionID, counted)
			return false
		case errors.Is(err, store.ErrResumeRefused):
			c.m.Metrics.ResumeRefused.Inc()
			c.m.Metrics.RefuseSession("resume_refused", c.id.Channel)
			c.log().Info("resume refused", "session", msg.Resume.SessionID)
			c.send(protocol.NewError(protocol.CodeResumeRefused,
				"this session cannot be resumed; start a new one", false, 0))
			c.close(protocol.DisconnectResumeRefused)
			return false
		case err != nil:
			c.refundResume(msg.Resume.SessionID, counted)
			return c.storeDown(err)
		}
		wantVoice, handle = rec.Mode == protocol.ModeVoice, rec.ResumeHandle
		c.asks = asksOf(rec)
		c.asks.profile = c.resumedProfile(rec.Profile)
		rec.Mode = protocol.ModeText // until the upstream is up again
		if rec.RegistryVersion != ready.RegistryVersion {
			c.log().Warn("resumed session moves to another tool registry version",
				"session", rec.ID, "was", rec.RegistryVersion, "now", ready.RegistryVersion)
			ready.RegistryChanged = true
			rec.RegistryVersion = ready.RegistryVersion
			c.pst.markDirty() // the next write rewrites the record with the new version
		}
		c.st.load(rec, hist)
		ready.SessionID, ready.ResumeToken, ready.Resumed = rec.ID, msg.Resume.ResumeToken, true
		ready.Turn = rec.Turn
		c.m.Metrics.SessionStarted(metrics.SessionResumed, c.id.Channel)
	} else {
		profile, r := c.m.checkAsks(msg, c.id)
		if r != nil {
			c.refuseStart(r)
			return false
		}
		if !c.allowNewSession() {
			return false
		}
		c.asks = sessionAsks{context: string(msg.Context), voice: msg.Voice, language: msg.LanguageCode, profile: profile}
		var token string
		var err error
		ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
		rec, token, err = c.m.Store.Create(ctx, store.Record{ID: newSessionID(), UserID: c.id.User, Mode: protocol.ModeText,
			RegistryVersion: ready.RegistryVersion, CreatedAt: c.m.now(),
			Context: c.asks.context, Voice: c.asks.voice, LanguageCode: c.asks.language, Profile: c.asks.profileName()})
		cancel()
		if c.ctx.Err() != nil {
			return false
		}
		if err != nil {
			return c.storeDown(err)
		}
		c.m.claim(rec.ID, c)
		c.st.load(rec, nil)
		ready.SessionID, ready.ResumeToken = rec.ID, token
		c.m.Metrics.SessionStarted(metrics.SessionNew, c.id.Channel)
	}
	if !c.owned(rec.Epoch) {
		return false // a newer resume was announced meanwhile
	}
	if c.asks.profile != nil {
		c.ts = c.m.toolsetFor(c.asks.profile)
		ready.Tools = c.ts.text.listed
	}
	c.logp.Store(c.log().With("session", ready.SessionID))
	c.pst.log = c.log()
	c.stats = c.m.Metrics.OpenSession()
	c.conv = c.m.Orchestrator.Open(orchestrator.Session{ID: rec.ID, UserID: c.id.User, Channel: c.id.Channel,
		Tools: c.ts.reg, Epoch: rec.Epoch, TakenOver: c.takenOver, Stats: c.stats, Log: c.log(), Claims: c.id.Claims,
		Budgets: c.asks.budgets()})
	if ready.Resumed {
		ready.PendingConfirmations = c.pendingConfirmations()
	}
	c.startTimeline(rec)
	c.alive(clock.Wall.Now())
	// After conv: the loop-state view reads it once started. Before
	// session.ready: a ping read after it waits for the rest of the start
	// (handle).
	c.started.Store(true)
	c.sendReady(ready)
	if !ready.Resumed {
		c.greet() // a resumed session was greeted when it started
	}
	c.m.kickPresence()
	c.m.Metrics.SessionLive(c.id.Channel)
	c.log().Info("session ready", "channel", c.id.Channel, "user", c.id.User, "resumed", ready.Resumed, "turn", ready.Turn,
		"profile", c.asks.profileName(),
		"init_tokens_estimate", c.ts.text.tokens)
	if h := c.st.record().Handoff; h.Active() {
		c.sendHandoff(0, h) // a person still has the conversation
	}
	switch {
	case wantVoice:
		c.act.startVoice("resume", handle)
	case msg.Mode == protocol.ModeVoice:
		c.act.requestVoice("session.start")
	}
	return true
}

// sendReady sends session.ready with as much of the newest history as
// ResumeHistoryMax allows and half the send queue holds, whole turns only;
// historyTruncated says that older entries exist.
func (c *conn) sendReady(ready protocol.SessionReady) {
	items := historyItems(c.st.historyCopy())
	if len(items) == 0 || !ready.Resumed {
		c.send(ready)
		return
	}
	bare, err := protocol.Encode(ready)
	if err != nil {
		c.log().Error("cannot encode event", "err", err)
		return
	}
	budget := min(c.m.cfg.SendQueueBytes/2, c.q.free()) - len(bare) - historyOverhead
	ready.History, ready.HistoryTruncated = newestTurns(items, max(c.m.cfg.ResumeHistoryMax, 0), max(budget, 0))
	if ready.HistoryTruncated ||
		slices.ContainsFunc(ready.History, func(it protocol.HistoryItem) bool { return it.Truncated }) {
		c.refused(limitResumeHistory, c.m.now())
	}
	c.send(ready)
}

// resume takes the session over: on this node first (the connection that
// holds it here ends, and its last writes land), then in the store, which
// makes this connection the owner (a new epoch) and tells every node. Two
// resumes of one session on this node take it one after the other.
func (c *conn) resume(r *protocol.Resume) (store.Record, []transport.Entry, error) {
	unlock, ok := c.m.lockSession(c.ctx, r.SessionID, c)
	if !ok {
		return store.Record{}, nil, c.ctx.Err()
	}
	defer unlock()
	if h := c.m.holder(r.SessionID); h != nil && h != c && h.owns(r.ResumeToken, c.id.User) {
		c.m.claim(r.SessionID, c)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	rec, hist, err := c.m.Store.Resume(ctx, r.SessionID, r.ResumeToken, c.id.User)
	cancel()
	if err != nil {
		return rec, hist, err
	}
	// A holder here that the token did not match by its digest (it had not
	// finished starting) is taken over now; its writes are fenced already.
	c.m.claim(rec.ID, c)
	return rec, hist, nil
}

// closing reports whether the connection's end is decided.
func (c *conn) closing() bool {
	select {
	case <-c.out.closing:
		return true
	default:
		return false
	}
}

// notRestoredYet answers a resume the store refused while Redis may still
// be getting its sessions back (Manager.restoring): the browser is told to
// reconnect and resume in a moment (4103) instead of giving the session up
// (4004). When the store cannot say (right after a restart a pooled
// connection may still point at the old process), it is a store failure:
// 4103 too, never a refusal. It reports whether it answered.
func (c *conn) notRestoredYet(id string) bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	restoring, err := c.m.restoring(ctx)
	if err != nil {
		c.storeDown(err)
		return true
	}
	if !restoring {
		return false
	}
	c.log().Info("resume of a session the store lost and has not got back yet; told to retry", "session", id)
	c.refuseForStore("restoring", protocol.DisconnectRestoring,
		"the session store restarted and this session is being restored; reconnect and resume in a moment")
	return true
}

// storeDown refuses the session because the store could not be reached;
// it reports false, the handshake's result.
func (c *conn) storeDown(err error) bool {
	c.log().Error("session store unavailable; refusing the session", "err", err)
	c.refuseForStore("store_unavailable", protocol.DisconnectStoreUnavailable,
		"session state is unavailable right now; try again shortly")
	return false
}

// refuseForStore refuses a session the store cannot serve now: counted
// under reason, the browser told to retry (store_unavailable, retryable,
// with msg) and closed with d, a reconnect-and-resume code.
func (c *conn) refuseForStore(reason string, d protocol.Disconnect, msg string) {
	c.m.Metrics.RefuseSession(reason, c.id.Channel)
	c.send(protocol.NewError(protocol.CodeStoreUnavailable, msg, true, 0))
	c.close(d)
}

// checkBlock refuses a blocked user's new connection with 4003. It reports
// (handshake result, go on).
func (c *conn) checkBlock() (bool, bool) {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	b, err := c.m.Store.BlockOf(ctx, c.id.User)
	if err != nil {
		if c.ctx.Err() != nil {
			return false, false
		}
		return c.storeDown(err), false
	}
	c.st.setBlock(b)
	if until := b.Until.UTC().Format(time.RFC3339); b.Until.After(c.m.now()) {
		c.m.Metrics.RefuseSession("blocked", c.id.Channel)
		c.send(protocol.Blocked{Until: until, Reason: b.Reason})
		c.close(protocol.DisconnectBlocked)
		return false, false
	}
	return true, true
}
