package wsbuf

import (
	"bufio"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// AcceptOptions tune Accept.
type AcceptOptions struct {
	// Subprotocols the server speaks, in its order of preference: the
	// first the client offers is chosen, none when it offers none of them.
	Subprotocols []string
}

// Accept upgrades an HTTP request to a server WebSocket (ServerConn),
// without compression and without checking Origin (the caller decides).
// A request that is no WebSocket handshake is answered over HTTP, with
// the status coder/websocket's Accept answers with: 426 without
// Connection: Upgrade or Upgrade: websocket, 405 for another method than
// GET, 400 for another version than 13 or a missing or malformed key,
// 501 when the connection cannot be taken over.
func Accept(w http.ResponseWriter, r *http.Request, o AcceptOptions) (*ServerConn, error) {
	if status, err := checkUpgrade(w, r); err != nil {
		http.Error(w, err.Error(), status)
		return nil, err
	}
	hj, ok := hijacker(w)
	if !ok {
		http.Error(w, http.StatusText(http.StatusNotImplemented), http.StatusNotImplemented)
		return nil, errors.New("websocket: http.ResponseWriter does not implement http.Hijacker")
	}
	h := w.Header()
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Accept", acceptKey(strings.TrimSpace(r.Header.Get("Sec-WebSocket-Key"))))
	sub := subprotocol(r.Header, o.Subprotocols)
	if sub != "" {
		h.Set("Sec-WebSocket-Protocol", sub)
	}
	w.WriteHeader(http.StatusSwitchingProtocols)
	// Hijack sends the response the server has buffered.
	c, brw, err := hj.Hijack()
	if err != nil {
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return nil, fmt.Errorf("websocket: hijacking the connection: %w", err)
	}
	return newServerConn(c, brw.Reader, sub), nil
}

// hijacker is w's http.Hijacker, looking through wrappers (a middleware's
// ResponseWriter with Unwrap, as http.ResponseController does).
func hijacker(w http.ResponseWriter) (http.Hijacker, bool) {
	for {
		switch t := w.(type) {
		case http.Hijacker:
			return t, true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil, false
		}
	}
}

// newServerConn frames c; pending is the HTTP server's reader, whose
// buffered bytes (a frame the client sent right after its handshake) are
// read first.
func newServerConn(c net.Conn, pending *bufio.Reader, sub string) *ServerConn {
	s := &ServerConn{sock: c, conn: c, wconn: c, limit: DefaultReadLimit, sub: sub}
	if tc, ok := c.(*tls.Conn); ok {
		// Closing a TLS connection first writes a close_notify, which a
		// full socket buffer holds up for seconds: Close drops the TCP
		// connection under it instead.
		s.sock = tc.NetConn()
	} else if sock, lean := leanSocket(c); lean != nil {
		s.lean, s.wconn = lean, sock
	}
	if n := pending.Buffered(); n > 0 {
		b, _ := pending.Peek(n)
		if s.lean != nil {
			s.lean.hold(b)
		} else {
			s.pend = append([]byte(nil), b...)
		}
	}
	return s
}

// checkUpgrade checks that r asks for a WebSocket, in coder/websocket's
// order and with its statuses.
func checkUpgrade(w http.ResponseWriter, r *http.Request) (int, error) {
	if !r.ProtoAtLeast(1, 1) {
		return http.StatusUpgradeRequired, fmt.Errorf("websocket: the handshake request must be at least HTTP/1.1: %q", r.Proto)
	}
	if !hasToken(r.Header, "Connection", "Upgrade") || !hasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		return http.StatusUpgradeRequired, errors.New("websocket: the request asks for no upgrade to websocket (Connection: Upgrade, Upgrade: websocket)")
	}
	if r.Method != http.MethodGet {
		return http.StatusMethodNotAllowed, fmt.Errorf("websocket: the handshake request's method is %q, not GET", r.Method)
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		return http.StatusBadRequest, fmt.Errorf("websocket: unsupported version %q (only 13 is)", r.Header.Get("Sec-WebSocket-Version"))
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return http.StatusBadRequest, errors.New("websocket: the request needs one Sec-WebSocket-Key")
	}
	key := strings.TrimSpace(keys[0])
	if v, err := base64.StdEncoding.DecodeString(key); err != nil || len(v) != 16 {
		return http.StatusBadRequest, fmt.Errorf("websocket: invalid Sec-WebSocket-Key %q: not 16 bytes in base64", key)
	}
	return 0, nil
}

// headerTokens are the comma-separated tokens of a header's values.
func headerTokens(h http.Header, key string) []string {
	var tokens []string
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			tokens = append(tokens, strings.TrimSpace(t))
		}
	}
	return tokens
}

func hasToken(h http.Header, key, token string) bool {
	for _, t := range headerTokens(h, key) {
		if strings.EqualFold(t, token) {
			return true
		}
	}
	return false
}

// subprotocol is the first of ours the client offers, as it spelt it.
func subprotocol(h http.Header, ours []string) string {
	offered := headerTokens(h, "Sec-WebSocket-Protocol")
	for _, sp := range ours {
		for _, cp := range offered {
			if strings.EqualFold(sp, cp) {
				return cp
			}
		}
	}
	return ""
}

// acceptKey is Sec-WebSocket-Accept for a client's key (RFC 6455 §4.2.2).
func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}
