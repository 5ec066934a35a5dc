package session

import "github.com/turnstile-gw/turnstile/transport"

// trimHistory keeps at most max newest entries and makes the result start
// at a user text entry, so that a model never sees a tool result or a
// function call whose other half was trimmed away.
func trimHistory(h []transport.Entry, max int) []transport.Entry {
	if max > 0 && len(h) > max {
		h = h[len(h)-max:]
	}
	for len(h) > 0 && !(h[0].Role == transport.RoleUser) {
		h = h[1:]
	}
	return h
}
