package fakegemini

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
)

// liveHandles maps session resumption handles to the conversation state a
// brain stored when the handle was issued. Handles live as long as the
// server: the real service keeps them for two hours after a session ends,
// longer than any test or demo session. The zero value is ready to use.
type liveHandles struct {
	mu     sync.Mutex
	states map[string]any
}

// issue stores state under a new opaque handle and returns the handle.
func (h *liveHandles) issue(state any) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	handle := "fake-" + base64.RawURLEncoding.EncodeToString(b)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.states == nil {
		h.states = make(map[string]any)
	}
	h.states[handle] = state
	return handle
}

// lookup returns the state stored under handle. A handle stays valid after
// it has been resumed, as with the real service.
func (h *liveHandles) lookup(handle string) (any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	state, ok := h.states[handle]
	return state, ok
}
