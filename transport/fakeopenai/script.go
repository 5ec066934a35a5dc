package fakeopenai

import (
	"context"
	"net/http"
	"sync"
)

// ScriptBrain answers requests with a queue of steps, one step per request,
// and records every request it receives. An exhausted script answers HTTP
// 500 "script exhausted" so a test notices the unexpected extra call. It is
// safe for concurrent use.
type ScriptBrain struct {
	mu       sync.Mutex
	steps    []func(*Request) Reply
	requests []*Request
}

// NewScript returns a brain that runs steps in order.
func NewScript(steps ...func(*Request) Reply) *ScriptBrain {
	return &ScriptBrain{steps: steps}
}

// Fixed is a script step that answers r whatever the request.
func Fixed(r Reply) func(*Request) Reply {
	return func(*Request) Reply { return r }
}

// Push appends steps to the script.
func (b *ScriptBrain) Push(steps ...func(*Request) Reply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.steps = append(b.steps, steps...)
}

// Requests returns every request received so far, in arrival order.
func (b *ScriptBrain) Requests() []*Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Request(nil), b.requests...)
}

// Remaining reports how many steps have not run yet.
func (b *ScriptBrain) Remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.steps)
}

// Respond runs the next step; the step runs outside the lock so that it may
// block or call Push.
func (b *ScriptBrain) Respond(_ context.Context, req *Request) Reply {
	b.mu.Lock()
	b.requests = append(b.requests, req)
	if len(b.steps) == 0 {
		b.mu.Unlock()
		return ErrorReply(http.StatusInternalServerError, "server_error", "", "script exhausted")
	}
	step := b.steps[0]
	b.steps = b.steps[1:]
	b.mu.Unlock()
	return step(req)
}
