package server

// How the HTTP server's view of each connection reaches the table of
// unauthenticated connections (unauth.go): its states (the idle timeout,
// the upgrade that authenticates it), each request's forwarded client
// behind a trusted proxy, and the listener that admits connections.

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// connState follows the HTTP server's view of each connection
// (http.Server.ConnState).
func (t *connTable) connState(c net.Conn, st http.ConnState) {
	tc := trackedOf(c)
	if tc == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc.elem == nil {
		return // authenticated, evicted or closed
	}
	tc.gen++
	if tc.timer != nil {
		tc.timer.Stop()
		tc.timer = nil
	}
	switch st {
	case http.StateActive:
		tc.state = stateActive
	case http.StateIdle:
		tc.state = stateIdle
		t.unauth.MoveToBack(tc.elem)
		if tc.ipElem != nil {
			t.byIP[tc.key].MoveToBack(tc.ipElem)
		}
		// A proxy's connections keep the HTTP idle timeout, which should
		// outlast the proxy's own (the proxy then closes first).
		if t.idle > 0 && !tc.proxied {
			gen := tc.gen
			tc.timer = clock.Wall.FuncTimer(t.idle, func() { t.idleOut(tc, gen) })
		}
	case http.StateHijacked:
		// Upgraded: the handler verified its token (or a carrier's
		// signature) first. It now counts among the node's connections only.
		t.leave(tc)
	}
}

// idleOut closes tc if it is still the idle unauthenticated connection
// the timer was set for.
func (t *connTable) idleOut(tc *tracked, gen uint64) {
	t.mu.Lock()
	stale := tc.gen != gen || tc.elem == nil
	t.mu.Unlock()
	if !stale {
		_ = tc.Close()
	}
}

// trackedOf is the table's connection under c: c itself, or under TLS
// (under wsbuf.TLSListener's feed, an Unwrapper, too).
func trackedOf(c net.Conn) *tracked {
	for range 3 {
		switch t := c.(type) {
		case *tracked:
			return t
		case interface{ NetConn() net.Conn }:
			c = t.NetConn()
		case interface{ Unwrap() net.Conn }:
			c = t.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

type trackedKey struct{}

// connContext hands each request its connection (http.Server.ConnContext).
func (t *connTable) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc := trackedOf(c); tc != nil {
		return context.WithValue(ctx, trackedKey{}, tc)
	}
	return ctx
}

// perClient applies the per-client cap to a trusted proxy's connections,
// whose client is known only from each request's forwarding headers: the
// connection counts as that client's until its next request. Over the cap
// the client's connection idle the longest is closed; when none is idle
// the request is answered 429 with Retry-After and its connection closed.
func (t *connTable) perClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tc, _ := r.Context().Value(trackedKey{}).(*tracked)
		if tc == nil || !tc.proxied || t.perIP <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		key := ""
		if a, ok := addrOf(t.proxies.ClientIP(r)); ok && !t.proxies.trusts(a) {
			key = clientKey(a)
		}
		t.mu.Lock()
		if tc.elem == nil || tc.key == key {
			t.mu.Unlock()
			next.ServeHTTP(w, r)
			return
		}
		victim, reason := t.makeRoom(tc, key)
		if reason != "" && victim == nil {
			t.mu.Unlock()
			t.refused(reason, key)
			w.Header().Set("Retry-After", strconv.Itoa(int(retryAfterUnauth/time.Second)))
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusTooManyRequests, map[string]any{
				"error":  "too many connections from this client that have not authenticated; close some or try again later",
				"reason": reason})
			return
		}
		t.setKey(tc, key)
		t.mu.Unlock()
		t.evict(victim, reason)
		next.ServeHTTP(w, r)
	})
}

// tableListener admits each accepted connection into its table.
type tableListener struct {
	net.Listener
	t *connTable
}

func (l *tableListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.t.admit(c); tc != nil {
			return tc, nil
		}
	}
}
