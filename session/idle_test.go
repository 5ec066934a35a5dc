package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
)

// An idle session — session.start, session.ready, then nothing — holds one
// goroutine of its own: its reader. The HTTP handler that upgraded it has
// returned (Manager.Start) and no writer waits while nothing is queued.
func TestIdleSessionHoldsOneGoroutine(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb, err := store.NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	reg, err := tools.Combine()
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "test"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	mgr := session.NewManager(session.Config{}, session.Deps{Store: st,
		Orchestrator: orchestrator.NewWith(orchestrator.Config{}, orchestrator.Deps{Registry: reg, Metrics: m, Log: log,
			Ledger: st, Confirms: st}),
		Tools: fixedTools{reg}, Metrics: m, Log: log})
	ended := make(chan struct{}, 16)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw := &wsbuf.ResponseWriter{ResponseWriter: w}
		ws, err := websocket.Accept(lw, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Subprotocol}})
		if err != nil {
			return
		}
		mgr.Start(context.WithoutCancel(r.Context()), ws, lw.Conn, session.Identity{User: "u", Anonymous: true},
			func() { ended <- struct{}{} })
	}))
	t.Cleanup(gw.Close)

	const n = 8
	var clients []*websocket.Conn
	for range n {
		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(gw.URL, "http"),
			&websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, ws)
		if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"session.start"}`)); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var ev struct{ Type string }
			if json.Unmarshal(data, &ev) == nil && ev.Type == protocol.TypeSessionReady {
				break
			}
		}
	}
	// Goroutines the session package started (the sessions, their
	// writers, turns, store writers, keepalive): one per session, the
	// reader. (Others come and go: miniredis serves each new connection.)
	var dump string
	if testwait.Poll(func() error {
		buf := make([]byte, 1<<20)
		dump = string(buf[:runtime.Stack(buf, true)])
		if got := strings.Count(dump, "created by github.com/turnstile-gw/turnstile/session."); got != n {
			return fmt.Errorf("%d goroutines of the session package", got)
		}
		return nil
	}) != nil {
		t.Fatalf("%d idle sessions do not hold one goroutine each:\n%s", n, dump)
	}
	for _, ws := range clients {
		_ = ws.CloseNow()
	}
	for range n {
		<-ended
	}
}
