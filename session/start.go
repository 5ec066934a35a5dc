package session

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// handshake reads session.start and answers session.ready, or closes.
func (c *conn) handshake() bool {
	timer := time.AfterFunc(c.m.cfg.HandshakeTimeout, func() { c.close(protocol.DisconnectHandshakeTimeout) })
	defer timer.Stop()
	typ, data, err := c.readFrame(nil)
	if err != nil {
		c.out.setReason(readReason(err))
		return false
	}
	msg, derr := protocol.Decode(data, protocol.Limits{MaxTextChars: c.m.cfg.MaxTextChars})
	if typ != websocket.MessageText || derr != nil || msg.Type != protocol.TypeSessionStart {
		c.m.Metrics.BrowserMessages.WithLabelValues("invalid").Inc()
		c.send(protocol.NewError(protocol.CodeBadMessage, "the first message must be session.start", false, 0))
		c.close(protocol.DisconnectProtocolViolation)
		return false
	}
	c.m.Metrics.BrowserMessages.WithLabelValues(msg.Type).Inc()
	timer.Stop()
	return c.start(msg)
}

func (c *conn) start(msg protocol.ClientMessage) bool {
	if ok, alive := c.checkBlock(); !alive {
		return ok
	}
	wantVoice, handle := false, ""
	c.ts = c.m.currentToolset()
	ready := protocol.SessionReady{
		Type: protocol.TypeSessionReady, Mode: protocol.ModeText,
		RegistryVersion: c.ts.reg.Version(),
		Tools:           c.ts.text.listed,
		Model:           protocol.ModelInfo{Name: c.m.cfg.ModelName, Offline: c.m.cfg.Offline},
		Notice:          c.m.offlineNote,
	}
	if msg.Resume != nil {
		rec, hist, err := c.resume(msg.Resume)
		if err == nil && c.m.claim(rec.ID, c) {
			// Another connection held the session on this node; now that it
			// has ended, read what it wrote last.
			rec, hist, err = c.resume(msg.Resume)
		}
		if errors.Is(err, store.ErrResumeRefused) {
			c.m.Metrics.ResumeRefused.Inc()
			c.m.Metrics.RefuseSession("resume_refused")
			c.log.Info("resume refused", "session", msg.Resume.SessionID)
			c.send(protocol.NewError(protocol.CodeResumeRefused,
				"this session cannot be resumed; start a new one", false, 0))
			c.close(protocol.DisconnectResumeRefused)
			return false
		}
		if err != nil {
			return c.storeDown(err)
		}
		wantVoice, handle = rec.Mode == protocol.ModeVoice, rec.ResumeHandle
		rec.Mode = protocol.ModeText // until the upstream is up again
		if rec.RegistryVersion != ready.RegistryVersion {
			c.log.Warn("resumed session moves to another tool registry version",
				"session", rec.ID, "was", rec.RegistryVersion, "now", ready.RegistryVersion)
			ready.RegistryChanged = true
			rec.RegistryVersion = ready.RegistryVersion
			c.pst.markDirty() // the next write rewrites the record with the new version
		}
		c.st.load(rec, hist)
		ready.SessionID, ready.ResumeToken, ready.Resumed = rec.ID, msg.Resume.ResumeToken, true
		ready.Turn, ready.History = rec.Turn, historyItems(c.st.historyCopy())
		ready.PendingConfirmations = c.pendingConfirmations()
		c.m.Metrics.SessionsStarted.WithLabelValues("resumed").Inc()
	} else {
		rec := store.Record{ID: newSessionID(), UserID: c.user, Mode: protocol.ModeText,
			RegistryVersion: ready.RegistryVersion, CreatedAt: c.m.cfg.Now()}
		ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
		token, err := c.m.Store.Create(ctx, rec)
		cancel()
		if err != nil {
			return c.storeDown(err)
		}
		c.m.claim(rec.ID, c)
		c.st.load(rec, nil)
		ready.SessionID, ready.ResumeToken = rec.ID, token
		c.m.Metrics.SessionsStarted.WithLabelValues("new").Inc()
	}
	c.log = c.log.With("session", ready.SessionID)
	c.pst.log = c.log
	c.send(ready)
	c.stats = c.m.Metrics.OpenSession()
	c.m.Metrics.SessionsActive.WithLabelValues(protocol.ModeText).Inc()
	c.log.Info("session ready", "user", c.user, "resumed", ready.Resumed, "turn", ready.Turn,
		"init_tokens_estimate", c.ts.text.tokens)
	switch {
	case wantVoice:
		c.act.startVoice("resume", handle)
	case msg.Mode == protocol.ModeVoice:
		c.act.startVoice("session.start", "")
	}
	return true
}

func (c *conn) resume(r *protocol.Resume) (store.Record, []transport.Entry, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	return c.m.Store.Resume(ctx, r.SessionID, r.ResumeToken, c.user)
}

func (c *conn) storeDown(err error) bool {
	c.m.Metrics.RefuseSession("store_unavailable")
	c.log.Error("session store unavailable; refusing the session", "err", err)
	c.send(protocol.NewError(protocol.CodeStoreUnavailable,
		"session state is unavailable right now; try again shortly", true, 0))
	c.close(protocol.DisconnectStoreUnavailable)
	return false
}

// historyItems is the text of the conversation as session.ready shows it,
// with each entry's turn number.
func historyItems(h []transport.Entry) []protocol.HistoryItem {
	var out []protocol.HistoryItem
	for _, e := range h {
		switch {
		case e.Role == transport.RoleUser:
			out = append(out, protocol.HistoryItem{Role: "user", Text: e.Text, Turn: e.Turn, Kind: e.Kind})
		case e.Role == transport.RoleModel && e.Text != "" && len(e.Calls) == 0:
			out = append(out, protocol.HistoryItem{Role: "model", Text: e.Text, Turn: e.Turn})
		}
	}
	return out
}

// checkBlock refuses a blocked user's new connection with 4003. It reports
// (handshake result, go on).
func (c *conn) checkBlock() (bool, bool) {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	b, err := c.m.Store.BlockOf(ctx, c.user)
	if err != nil {
		return c.storeDown(err), false
	}
	if until := b.Until.UTC().Format(time.RFC3339); b.Until.After(c.m.cfg.Now()) {
		c.m.Metrics.RefuseSession("blocked")
		c.send(protocol.Blocked{Type: protocol.TypeBlocked, Until: until, Reason: b.Reason})
		c.close(protocol.DisconnectBlocked)
		return false, false
	}
	return true, true
}
