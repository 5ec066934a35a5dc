package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/telephony"
)

// Telephony puts a phone carrier on the public listener:
// POST /v1/telephony/<carrier> (the voice webhook, answered with the
// carrier's "open a stream" instruction) and GET
// /v1/telephony/<carrier>/stream (the media stream's WebSocket).
type Telephony struct {
	Carrier telephony.Carrier
	Signer  *telephony.Signer
	// PublicURL is the gateway's public base URL (https://gw.example.com):
	// the URL the carrier calls, which its signatures cover, and the base
	// of the stream URL in the answer. "": the request's own Host (a
	// gateway reached directly, on loopback in development).
	PublicURL string
	// StartTimeout bounds the wait for the stream's start; default 10 s.
	StartTimeout time.Duration
	// HangupWait bounds a hang-up's wait for the goodbye to play; default
	// telephony.DefaultHangupWait.
	HangupWait time.Duration
	// Starts remembers which signed stream starts a stream has used, across
	// the fleet, so that a start sent again is refused, and takes the call's
	// one stream lease in the same round trip. Required: New panics without
	// it.
	Starts CallStarts
	// BodyTimeout bounds the reading of a webhook's body, from the end of
	// its headers; default DefaultWebhookBodyTimeout. A client that sends
	// its headers and then trickles (or withholds) the body is cut then,
	// instead of holding a handler and its connection for ever.
	BodyTimeout time.Duration
}

// CallStarts opens a phone call's stream across the fleet in one round
// trip (the store's RedisStore implements it): it records the first use
// of the stream's signed start and, when it is the first, takes the call's
// one stream lease (store.CallLeases) for st.Holder unless that is "".
// first is false for a start a stream used before, on any node, within
// st.ReplayTTL; admitted is false when another stream of the call holds
// the lease. Errors mean Redis did not answer.
type CallStarts interface {
	StartCallStream(ctx context.Context, st store.CallStreamStart) (first, admitted bool, err error)
}

// DefaultWebhookBodyTimeout is Telephony.BodyTimeout's default: a carrier
// sends its ~1 KiB form at once.
const DefaultWebhookBodyTimeout = 10 * time.Second

// Telephony limits.
const (
	// maxWebhookBytes bounds a webhook's form (Twilio's is about 1 KiB).
	maxWebhookBytes = 64 << 10
	// maxStreamFrame bounds one carrier frame (a 20 ms media frame is
	// about 300 bytes; a start with parameters a few KiB).
	maxStreamFrame = 64 << 10
)

// streamingCalls is the calls with a stream on this node, recorded before
// the fleet-wide check (admission.admitCall), each with its stream's start
// signature: a second stream for a call already streaming or starting here
// is refused without asking Redis, and even when Redis does not answer
// (admitCall then lets it through).
type streamingCalls struct {
	mu  sync.Mutex
	ids map[string]string // call id → its stream's start signature
}

// add records call id's stream, whose start's signature is sig, unless
// the call has one here: then ok is false, and replayed tells whether the
// stream here used the same start.
func (c *streamingCalls) add(id, sig string) (ok, replayed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, dup := c.ids[id]; dup {
		return false, had == sig
	}
	if c.ids == nil {
		c.ids = map[string]string{}
	}
	c.ids[id] = sig
	return true, false
}

func (c *streamingCalls) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
}

func (s *Server) routeTelephony(t *Telephony) {
	if t.Starts == nil {
		panic("server: Telephony.Starts is nil: a phone stream's start needs the store's CallStarts")
	}
	if t.StartTimeout <= 0 {
		t.StartTimeout = 10 * time.Second
	}
	if t.BodyTimeout <= 0 {
		t.BodyTimeout = DefaultWebhookBodyTimeout
	}
	t.PublicURL = strings.TrimRight(t.PublicURL, "/")
	base := "/v1/telephony/" + t.Carrier.Name()
	s.public.HandleFunc("POST "+base, func(w http.ResponseWriter, r *http.Request) { s.telephonyWebhook(t, w, r) })
	s.public.HandleFunc("GET "+base+"/stream", func(w http.ResponseWriter, r *http.Request) { s.telephonyStream(t, w, r) })
}

// base is the gateway's public base URL for r (http or https).
func (t *Telephony) base(r *http.Request) string {
	switch {
	case t.PublicURL != "":
		return t.PublicURL
	case r.TLS != nil:
		return "https://" + r.Host
	default:
		return "http://" + r.Host
	}
}

// wsScheme turns an http(s) base URL into ws(s).
func wsScheme(u string) string {
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "ws://" + rest
	}
	return u
}

func (s *Server) telephonyEvent(t *Telephony, ev metrics.TelephonyEvent) {
	s.d.Metrics.Telephony(t.Carrier.Channel(), ev)
}

// telephonyWebhook answers a call's webhook: the carrier's signature first
// (403 and nothing else), then a draining or full node (503, so that the
// carrier's fallback URL or another node takes the call), then the answer
// opening a stream with the call's identity signed by this gateway.
func (s *Server) telephonyWebhook(t *Telephony, w http.ResponseWriter, r *http.Request) {
	// The server has no ReadTimeout (it would cut WebSockets): the body's
	// deadline is set here, for this request only.
	_ = http.NewResponseController(w).SetReadDeadline(clock.Wall.Now().Add(t.BodyTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, maxWebhookBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if err := t.Carrier.Verify(r, t.base(r)+r.URL.RequestURI(), r.PostForm); err != nil {
		s.telephonyEvent(t, metrics.TelephonyWebhookRefused)
		s.telephonyRefused(t, "webhook refused: bad or missing carrier signature", r)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if s.draining.Load() || s.d.Sessions.Draining() {
		s.telephonyEvent(t, metrics.TelephonyWebhookDraining)
		w.Header().Set("Retry-After", "0")
		http.Error(w, "this node is draining", http.StatusServiceUnavailable)
		return
	}
	if leave, ok := s.admit.admitSession(); ok {
		leave() // a look only: the stream takes its place
	} else {
		s.refused(metrics.RefusedMaxSessions, t.Carrier.Channel(), r.RemoteAddr, nil)
		http.Error(w, "this node is at its session limit", http.StatusServiceUnavailable)
		return
	}
	call, err := t.Carrier.Call(r.PostForm)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	streamURL := wsScheme(t.base(r)) + "/v1/telephony/" + t.Carrier.Name() + "/stream"
	body, ctype := t.Carrier.Answer(streamURL, t.Signer.Params(call))
	s.telephonyEvent(t, metrics.TelephonyWebhook)
	s.d.Log.Info("call answered with a stream", "carrier", t.Carrier.Name(), "call", call.ID)
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// telephonyStream takes a call's media stream: the carrier's signature of
// its URL before the upgrade (403 and nothing else), then the stream's
// start with this gateway's signed call parameters, then a voice session
// whose user is the caller's pseudonym.
func (s *Server) telephonyStream(t *Telephony, w http.ResponseWriter, r *http.Request) {
	// The carrier signs the stream URL as the answer gave it (wss://…);
	// its https:// twin is accepted too.
	u := t.base(r) + r.URL.RequestURI()
	if t.Carrier.Verify(r, wsScheme(u), nil) != nil && t.Carrier.Verify(r, u, nil) != nil {
		s.telephonyEvent(t, metrics.TelephonyStreamRefused)
		s.telephonyRefused(t, "stream refused: bad or missing carrier signature", r)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if s.draining.Load() || s.d.Sessions.Draining() {
		http.Error(w, "this node is draining", http.StatusServiceUnavailable)
		return
	}
	leaveNode, ok := s.admit.admitSession()
	if !ok {
		s.refused(metrics.RefusedMaxSessions, t.Carrier.Channel(), r.RemoteAddr, nil)
		http.Error(w, "this node is at its session limit", http.StatusServiceUnavailable)
		return
	}
	defer leaveNode()
	hw := &wsbuf.ResponseWriter{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.d.Log.Info("telephony stream: websocket refused", "err", err, "remote", r.RemoteAddr)
		return
	}
	ws.SetReadLimit(maxStreamFrame)
	ctx := context.WithoutCancel(r.Context())
	log := s.d.Log.With("carrier", t.Carrier.Name())
	b := telephony.NewBridge(telephony.BridgeConfig{Carrier: t.Carrier.Channel(), Signer: t.Signer,
		Metrics: s.d.Metrics, Log: log, HangupWait: t.HangupWait}, session.WebSocketWire(ws), t.Carrier.NewStream())
	sctx, cancel := context.WithTimeout(ctx, t.StartTimeout)
	call, err := b.Start(sctx)
	cancel()
	if err != nil {
		event := metrics.TelephonyStreamBadFrame
		if errors.Is(err, telephony.ErrParams) {
			event = metrics.TelephonyStreamBadParams
		}
		s.telephonyEvent(t, event)
		log.Warn("telephony stream ended before its session: no valid start", "err", err, "remote", r.RemoteAddr)
		_ = ws.Close(websocket.StatusPolicyViolation, "no valid start")
		return
	}
	// The node's own record comes first: a second stream of a call that
	// streams (or is starting) here is refused at once, without a Redis
	// round trip, without recording its start and without taking and
	// releasing the call's lease.
	sig := b.StartSignature()
	if ok, replayed := s.calls.add(call.ID, sig); !ok {
		if replayed {
			s.refuseReplayedStart(t, ws, call.ID, r, log)
		} else {
			s.refuseDuplicateStream(t, ws, call.ID, "", log)
		}
		return
	}
	defer s.calls.remove(call.ID)
	leaveCall, verdict := s.admit.admitCall(ctx, t.Starts, call.ID, sig)
	switch verdict {
	case callReplayed:
		s.refuseReplayedStart(t, ws, call.ID, r, log)
		return
	case callElsewhere:
		s.refuseDuplicateStream(t, ws, call.ID, " on another node", log)
		return
	}
	defer leaveCall()
	user := t.Signer.Pseudonym(call.From)
	leaveUser, ok := s.admit.admitUser(ctx, user)
	if !ok {
		s.refused(metrics.RefusedMaxSessionsPerUser, t.Carrier.Channel(), r.RemoteAddr, nil)
		_ = ws.Close(websocket.StatusPolicyViolation, "too many calls from this caller")
		return
	}
	defer leaveUser()
	log.Info("call stream started", "call", call.ID, "user", user)
	s.d.Sessions.ServeWire(ctx, b, hw.Conn, session.Identity{User: user, Channel: t.Carrier.Channel(),
		Prompt: telephony.Prompt, Pinned: true, ClientIP: s.cfg.TrustedProxies.ClientIP(r)})
}

// refuseReplayedStart ends a stream whose signed start a stream used
// before.
func (s *Server) refuseReplayedStart(t *Telephony, ws *websocket.Conn, callID string, r *http.Request, log *slog.Logger) {
	s.telephonyEvent(t, metrics.TelephonyStreamReplayed)
	if count, ok := s.throttle.Note("telephony_replayed_start", clock.Wall.Now(), 1); ok {
		log.Warn("telephony stream refused: its signed start was used by a stream before (a replayed start: "+
			"someone holds a copy of the carrier's stream frames)", "call", callID, "remote", r.RemoteAddr,
			"count", count)
	}
	_ = ws.Close(websocket.StatusPolicyViolation, "replayed start")
}

// refuseDuplicateStream ends a second stream of a call that has one where
// ("": on this node).
func (s *Server) refuseDuplicateStream(t *Telephony, ws *websocket.Conn, callID, where string, log *slog.Logger) {
	s.telephonyEvent(t, metrics.TelephonyStreamDuplicate)
	log.Warn("telephony stream refused: the call already has a stream"+where, "call", callID)
	_ = ws.Close(websocket.StatusPolicyViolation, "the call already has a stream")
}

// telephonyRefused logs a refused carrier request, at most once per
// logEvery.
func (s *Server) telephonyRefused(t *Telephony, msg string, r *http.Request) {
	if count, ok := s.throttle.Note("telephony_"+msg, clock.Wall.Now(), 1); ok {
		s.d.Log.Warn(msg, "carrier", t.Carrier.Name(), "remote", r.RemoteAddr, "path", r.URL.Path, "count", count)
	}
}
