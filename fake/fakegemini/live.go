package fakegemini

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Close reasons the real Live service uses (see gemini-wire.md §2.6).
const (
	reasonInvalidArgument = "Request contains an invalid argument."
	reasonBadKey          = "API key not valid. Please pass a valid API key."
	reasonNotImplemented  = "Operation is not implemented, or supported, or enabled."
	reasonInternal        = "Internal error occurred."
	reasonShutdown        = "The fake Gemini server is shutting down."
)

const (
	// setupTimeout bounds the wait for the client's setup message.
	setupTimeout = 10 * time.Second
	// liveWriteTimeout bounds one frame write to a client that stopped
	// reading.
	liveWriteTimeout = 10 * time.Second
	// closeGrace bounds the close handshake once the brain is done; the
	// genai client answers a close frame only while someone calls Receive.
	closeGrace = 2 * time.Second
)

// liveHub is the Server's Live state. The zero value serves no Live brain.
type liveHub struct {
	mu      sync.Mutex
	brain   LiveBrain
	handles liveHandles
	conns   atomic.Int64
	seq     atomic.Uint64
}

// SetLiveBrain makes the server serve the BidiGenerateContent WebSocket
// with brain. Without one, Live connections are closed with 1008
// "Operation is not implemented, or supported, or enabled.". Connections
// already open keep their brain.
func (s *Server) SetLiveBrain(brain LiveBrain) {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	s.live.brain = brain
}

// LiveConnections reports how many Live WebSocket connections are open
// (their handlers are also counted by InFlight).
func (s *Server) LiveConnections() int { return int(s.live.conns.Load()) }

// parseLiveRPC splits the last path element of a Gemini API Live URL,
// "google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent".
func parseLiveRPC(rpc string) (version, method string, ok bool) {
	rest, ok := strings.CutPrefix(rpc, "google.ai.generativelanguage.")
	if !ok {
		return "", "", false
	}
	version, method, ok = strings.Cut(rest, ".GenerativeService.")
	if !ok {
		return "", "", false
	}
	switch {
	case !apiVersionServed(GeminiAPI, version):
		return "", "", false
	case method == "BidiGenerateContent":
	case method == "BidiGenerateContentConstrained" && version == "v1alpha":
	default:
		return "", "", false
	}
	return version, method, true
}

// parseVertexLiveRPC reads the version from the two last path elements of
// a Vertex AI Live URL,
// "google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent".
func parseVertexLiveRPC(service, method string) (version string, ok bool) {
	rest, ok := strings.CutPrefix(service, "google.cloud.aiplatform.")
	if !ok || method != "BidiGenerateContent" {
		return "", false
	}
	version, ok = strings.CutSuffix(rest, ".LlmBidiService")
	if !ok || !apiVersionServed(VertexAI, version) {
		return "", false
	}
	return version, true
}

// liveAuthorized mirrors what the genai clients send: x-goog-api-key (Go)
// or ?key= (JS), or an ephemeral token on the constrained method
// ("Authorization: Token ..." from Go, ?access_token= from JS).
func liveAuthorized(r *http.Request, method string) bool {
	if method == "BidiGenerateContentConstrained" {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Token ")
		return ok && tok != "" || r.URL.Query().Get("access_token") != ""
	}
	return hasAPIKey(r)
}

// handleLive serves the Gemini API's GET /ws/{rpc}. A wrong path is refused
// before the upgrade (404, as the real front end does); everything else is
// answered over the WebSocket: a missing key closes 1008, a bad or
// unresumable setup closes 1007, like the real service, so the genai
// client surfaces the reason as a *websocket.CloseError from Connect.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	version, method, ok := parseLiveRPC(r.PathValue("rpc"))
	if !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("%s is not a Live endpoint of the fake Gemini API", r.URL.Path))
		return
	}
	s.serveLiveConn(w, r, GeminiAPI, version, liveAuthorized(r, method))
}

// handleVertexLive serves Vertex AI's GET /ws/{service}/{method}. It wants
// an OAuth access token; without one it refuses the upgrade with 401
// (assumed: Google front ends answer unauthenticated HTTP requests so, and
// the Go SDK then reports "bad handshake").
func (s *Server) handleVertexLive(w http.ResponseWriter, r *http.Request) {
	version, ok := parseVertexLiveRPC(r.PathValue("service"), r.PathValue("method"))
	if !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("%s is not a Live endpoint of the fake Vertex AI API", r.URL.Path))
		return
	}
	if _, ok := bearerToken(r); !ok {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", msgNoBearer)
		return
	}
	s.serveLiveConn(w, r, VertexAI, version, true)
}

// serveLiveConn upgrades r and runs the connection with the Live brain.
func (s *Server) serveLiveConn(w http.ResponseWriter, r *http.Request, api API, version string, authorized bool) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Info("fake gemini live: upgrade failed", "err", err)
		return // Accept has answered the request
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxBodyBytes)

	id := fmt.Sprintf("live-%d", s.live.seq.Add(1))
	log := s.log.With("live", id, "api", string(api))
	if !authorized {
		log.Info("fake gemini live: no API key")
		closeNow(log, conn, websocket.StatusPolicyViolation, reasonBadKey)
		return
	}
	s.live.mu.Lock()
	brain := s.live.brain
	s.live.mu.Unlock()
	if brain == nil {
		log.Info("fake gemini live: no live brain configured")
		closeNow(log, conn, websocket.StatusPolicyViolation, reasonNotImplemented)
		return
	}

	info, code, err := s.liveHandshake(r.Context(), conn, api)
	if err != nil {
		log.Info("fake gemini live: setup refused", "err", err)
		if errors.Is(err, errBadModel) {
			s.violate("Live %s: %v", id, err)
		}
		if code != 0 {
			closeNow(log, conn, code, reasonInvalidArgument)
		}
		return
	}
	_, info.record = brain.(frameRecorder)
	info.id, info.api, info.apiVersion, info.header = id, api, version, r.Header.Clone()
	log = log.With("model", info.setup.Model)
	log.Debug("fake gemini live: session started", "version", version, "path", r.URL.Path, "resumed", info.resumed)

	s.live.conns.Add(1)
	defer s.live.conns.Add(-1)
	s.serveLive(r.Context(), conn, log, brain, info)
}

// liveHandshake reads the setup, resolves its resumption handle and
// answers setupComplete. On failure it returns the close code to send (0
// when the connection is already unusable).
func (s *Server) liveHandshake(ctx context.Context, conn *websocket.Conn, api API) (liveInfo, websocket.StatusCode, error) {
	rctx, cancel := context.WithTimeout(ctx, setupTimeout)
	_, data, err := conn.Read(rctx)
	cancel()
	if err != nil {
		return liveInfo{}, 0, fmt.Errorf("read setup: %w", err)
	}
	setup, err := decodeSetup(data, api)
	if err != nil {
		return liveInfo{}, websocket.StatusInvalidFramePayloadData, err
	}
	info := liveInfo{setup: setup, firstFrame: data}
	if h := setup.ResumeHandle(); h != "" {
		state, ok := s.live.handles.lookup(h)
		if !ok {
			return liveInfo{}, websocket.StatusInvalidFramePayloadData, errors.New("setup: unknown session resumption handle")
		}
		info.resumed, info.state = true, state
	}
	wctx, cancel := context.WithTimeout(ctx, liveWriteTimeout)
	defer cancel()
	if err := conn.Write(wctx, websocket.MessageBinary, []byte(`{"setupComplete":{}}`)); err != nil {
		return liveInfo{}, 0, fmt.Errorf("write setupComplete: %w", err)
	}
	return info, 0, nil
}

// serveLive runs one connection after setupComplete: a reader, a single
// writer, and the brain, until all three are done.
func (s *Server) serveLive(reqCtx context.Context, conn *websocket.Conn, log *slog.Logger, brain LiveBrain, info liveInfo) {
	// The socket outlives the request context so that a server shutdown
	// can still send its close frame.
	connCtx, connCancel := context.WithCancel(context.WithoutCancel(reqCtx))
	defer connCancel()
	ctx, cancel := context.WithCancel(reqCtx)
	defer cancel()
	stop := context.AfterFunc(connCtx, cancel)
	defer stop()

	ls := &LiveSession{
		ID: info.id, API: info.api, APIVersion: info.apiVersion, Header: info.header, Setup: info.setup, Resumed: info.resumed,
		srv: s, conn: conn, log: log,
		ctx: ctx, cancel: cancel, connCtx: connCtx, connCancel: connCancel,
		events: make(chan ClientEvent, liveQueue), out: make(chan liveFrame, liveQueue), writerDone: make(chan struct{}),
		state: info.state, record: info.record, strict: s.strict.on.Load(),
	}
	ls.recordFrame(info.firstFrame)

	var wg sync.WaitGroup
	wg.Go(ls.writeLoop)
	wg.Go(ls.readLoop)

	err := brain.ServeLive(ctx, ls)
	shutdown := reqCtx.Err() != nil
	cancel()
	switch {
	case shutdown:
		_ = ls.Close(int(websocket.StatusGoingAway), reasonShutdown)
	case err != nil && connCtx.Err() == nil:
		log.Warn("fake gemini live: brain failed", "err", err)
		_ = ls.Close(int(websocket.StatusInternalError), reasonInternal)
	default:
		_ = ls.Close(int(websocket.StatusNormalClosure), "")
	}
	t := time.NewTimer(closeGrace)
	select {
	case <-ls.writerDone:
	case <-t.C:
		log.Debug("fake gemini live: close handshake timed out")
	}
	t.Stop()
	connCancel()
	wg.Wait()
	log.Debug("fake gemini live: session ended")
}

// writeLoop is the connection's only writer: it sends queued frames in
// order and performs the close handshake when the close frame comes up.
func (s *LiveSession) writeLoop() {
	defer close(s.writerDone)
	defer s.connCancel()
	for {
		select {
		case f := <-s.out:
			if f.close {
				if err := s.conn.Close(f.code, f.reason); err != nil {
					s.log.Debug("fake gemini live: close", "code", int(f.code), "err", err)
				}
				return
			}
			// Strict mode learns from the frame before it leaves: the
			// client cannot answer it earlier.
			s.turn.apply(f.note)
			ctx, cancel := context.WithTimeout(s.connCtx, liveWriteTimeout)
			err := s.conn.Write(ctx, websocket.MessageBinary, f.data)
			cancel()
			if err != nil {
				s.log.Debug("fake gemini live: write failed", "err", err)
				return
			}
		case <-s.connCtx.Done():
			return
		}
	}
}

// readLoop decodes client frames into events until the client hangs up or
// the connection closes. A frame the real service would refuse closes the
// connection with 1007.
func (s *LiveSession) readLoop() {
	defer close(s.events)
	defer s.connCancel()
	for {
		_, data, err := s.conn.Read(s.connCtx)
		if err != nil {
			logReadEnd(s.log, err)
			return
		}
		s.recordFrame(data)
		evs, err := decodeClientMessage(data)
		if err != nil {
			s.log.Info("fake gemini live: bad client message", "err", err)
			_ = s.Close(int(websocket.StatusInvalidFramePayloadData), reasonInvalidArgument)
			continue
		}
		if s.strict && !s.checkClientEvents(evs) {
			_ = s.Close(int(websocket.StatusInvalidFramePayloadData), reasonInvalidArgument)
			continue
		}
		for _, ev := range evs {
			select {
			case s.events <- ev:
			case <-s.ctx.Done(): // the brain is gone: nobody reads events
			}
		}
	}
}

// logReadEnd tells a client's hang-up (the genai client closes its TCP
// connection without a close frame: 1006) from anything unusual.
func logReadEnd(log *slog.Logger, err error) {
	switch code := websocket.CloseStatus(err); {
	case code == websocket.StatusNormalClosure || code == websocket.StatusGoingAway:
		log.Debug("fake gemini live: client closed", "code", int(code))
	case code != -1:
		log.Info("fake gemini live: client closed", "code", int(code), "reason", closeReason(err))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.Canceled):
		log.Debug("fake gemini live: connection ended", "err", err)
	default:
		log.Debug("fake gemini live: read failed", "err", err)
	}
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

// closeNow sends a close frame before any session exists.
func closeNow(log *slog.Logger, conn *websocket.Conn, code websocket.StatusCode, reason string) {
	if err := conn.Close(code, reason); err != nil {
		log.Debug("fake gemini live: close", "code", int(code), "err", err)
	}
}

// frameRecorder is implemented by brains whose sessions record every raw
// client frame (see LiveSession.Frames).
type frameRecorder interface {
	recordsFrames()
}
