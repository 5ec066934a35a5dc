package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// heldBrain holds every text request until its round is released, and
// notes the connection each came on and whether it asked for compression.
type heldBrain struct {
	mu      sync.Mutex
	release chan struct{}
	held    int
	conns   map[string]bool
	gzip    int
}

func (h *heldBrain) Respond(ctx context.Context, r *fakegemini.Request) fakegemini.Reply {
	h.mu.Lock()
	h.conns[r.RemoteAddr] = true
	if r.Header.Get("Accept-Encoding") != "" {
		h.gzip++
	}
	h.held++
	release := h.release
	h.mu.Unlock()
	select {
	case <-release:
	case <-ctx.Done():
	}
	return fakegemini.TextReply("Beans ship within two business days of roasting.", 3)
}

func (h *heldBrain) round() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release, h.held = make(chan struct{}), 0
	return h.release
}

// Four sessions type at once, twice: their model requests go on the same
// four connections the second time (none opened for a turn once the
// first ones exist), and none asks for a compressed answer. The model's
// first chunk is not kept waiting for a new connection.
func TestConcurrentTextTurnsKeepTheirModelConnections(t *testing.T) {
	const sessions = 4
	brain := &heldBrain{conns: map[string]bool{}}
	g := startGateway(t, unlimited(defaultTestConfig(t)), brain)
	var clients []*wsClient
	for range sessions {
		c := g.dial("", nil)
		c.start(nil)
		clients = append(clients, c)
	}
	for round := 1; round <= 2; round++ {
		release := brain.round()
		for _, c := range clients {
			c.send(map[string]any{"type": "text", "text": "when do you ship?"})
		}
		testwait.For(t, "every session's model request to be in flight", func() bool {
			brain.mu.Lock()
			defer brain.mu.Unlock()
			return brain.held == sessions
		})
		close(release)
		for _, c := range clients {
			c.until("turn.done")
		}
		testwait.For(t, "the model connections back in the HTTP client's idle pool", modelConnsIdle)
	}
	brain.mu.Lock()
	defer brain.mu.Unlock()
	if len(brain.conns) != sessions {
		t.Errorf("%d sessions' two rounds of turns came on %d connections, want %d (one each, kept)",
			sessions, len(brain.conns), sessions)
	}
	if brain.gzip != 0 {
		t.Errorf("%d of %d model requests asked for a compressed answer", brain.gzip, 2*sessions)
	}
}

// modelConnsIdle reports whether every HTTP connection of the process's
// clients (the model's) is back in its idle pool. net/http hands a
// connection back on its read loop's goroutine once the response's body
// has ended — which may come after the turn.done that the body's end led
// to, and a user typing within that instant would get a new connection —
// and the read loop then waits for the next response's first byte, in
// an IO wait; until then it waits on a select.
func modelConnsIdle() bool {
	for _, g := range testwait.Stacks() {
		if strings.Contains(g, "net/http.(*persistConn).readLoop") && !strings.Contains(g, "[IO wait") {
			return false
		}
	}
	return true
}
