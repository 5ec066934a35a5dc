package session

import (
	"context"
	"log/slog"
)

// A connection's log lines carry its client's address and, once it has
// one, its session's id. slog's With would give the connection a handler
// of its own with those attributes formatted in advance (for the JSON
// handler a copy of its state and of the formatted bytes, about 0.25 KiB,
// and one more for the session's id), kept for as long as the connection
// lives, although most connections write two or three lines in all. The
// connection's logger instead keeps the two values, and adds them to the
// node's handler — as With would have, in the same order — only for a line
// that is written.

// connHandler is the node's handler with a connection's attributes added
// at each line it handles (see above). Its output is that of the node's
// handler with WithAttrs of client_ip, then of session, for those set.
type connHandler struct {
	base     slog.Handler
	clientIP string // "" none
	session  string // "" none
}

// connLogger is a connection's logger: the node's log with the client's
// address (clientIP, "" none) and the session's id (session, "" none).
func connLogger(node *slog.Logger, clientIP, session string) *slog.Logger {
	if node == nil {
		return nil
	}
	base := node.Handler()
	if h, ok := base.(*connHandler); ok {
		base = h.base
	}
	if clientIP == "" && session == "" {
		return slog.New(base)
	}
	return slog.New(&connHandler{base: base, clientIP: clientIP, session: session})
}

// with is the node's handler with the connection's attributes added.
func (h *connHandler) with() slog.Handler {
	b := h.base
	if h.clientIP != "" {
		b = b.WithAttrs([]slog.Attr{slog.String("client_ip", h.clientIP)})
	}
	if h.session != "" {
		b = b.WithAttrs([]slog.Attr{slog.String("session", h.session)})
	}
	return b
}

func (h *connHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }
func (h *connHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.with().Handle(ctx, r)
}
func (h *connHandler) WithAttrs(as []slog.Attr) slog.Handler { return h.with().WithAttrs(as) }
func (h *connHandler) WithGroup(name string) slog.Handler    { return h.with().WithGroup(name) }

// logSource is where a part of a session finds its logger when it writes
// a line: the connection's at that moment (its session's id added at the
// start), not a copy of the one it had when it was made.
type logSource interface{ log() *slog.Logger }
