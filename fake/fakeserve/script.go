package fakeserve

import (
	"context"
	"sync"
)

// Script is a brain that answers requests with a queue of steps, one step
// per request, and records every request it receives. An exhausted script
// answers with its exhausted reply (an HTTP 500 "script exhausted" in the
// fakes) so that a test notices the unexpected extra call. It is safe for
// concurrent use.
type Script[Req, Reply any] struct {
	exhausted func() Reply

	mu       sync.Mutex
	steps    []func(*Req) Reply
	requests []*Req
}

// NewScript returns a script that runs steps in order and answers
// exhausted() once they are used up.
func NewScript[Req, Reply any](exhausted func() Reply, steps ...func(*Req) Reply) *Script[Req, Reply] {
	return &Script[Req, Reply]{exhausted: exhausted, steps: steps}
}

// Push appends steps to the script.
func (b *Script[Req, Reply]) Push(steps ...func(*Req) Reply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.steps = append(b.steps, steps...)
}

// Requests returns every request received so far, in arrival order.
func (b *Script[Req, Reply]) Requests() []*Req {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Req(nil), b.requests...)
}

// Remaining reports how many steps have not run yet.
func (b *Script[Req, Reply]) Remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.steps)
}

// Respond runs the next step; the step runs outside the lock so that it may
// block or call Push.
func (b *Script[Req, Reply]) Respond(_ context.Context, req *Req) Reply {
	b.mu.Lock()
	b.requests = append(b.requests, req)
	if len(b.steps) == 0 {
		b.mu.Unlock()
		return b.exhausted()
	}
	step := b.steps[0]
	b.steps = b.steps[1:]
	b.mu.Unlock()
	return step(req)
}
