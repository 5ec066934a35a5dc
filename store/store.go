// Package store keeps session state in Redis: session records and bounded
// histories, confirmations and approvals, the call ledger, and user blocks,
// all with a TTL and every call bounded by a short deadline. It also starts
// the embedded miniredis the gateway uses when no REDIS_URL is set.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/transport"
)

// Record is the durable part of a session, kept in Redis under
// turnstile:{<id>}:meta. The resume token itself is never stored: only its
// SHA-256 digest, so that reading Redis does not let anyone resume.
type Record struct {
	ID              string
	UserID          string
	Mode            string // "text" or "voice"
	Turn            int    // number of the last turn started
	RegistryVersion string // tool registry version pinned at creation
	CreatedAt       time.Time
	// PendingMessage is a SET_PENDING_MESSAGE intent's message, delivered to
	// the model at the next turn.
	PendingMessage string
	// ResumeHandle is the newest resumable handle of the session's voice
	// upstream, so that any node can resume it.
	ResumeHandle string
}

// ErrResumeRefused is returned by Store.Resume for an unknown or expired
// session, a wrong token, or a token of another user. Callers must not tell
// these cases apart to the client.
var ErrResumeRefused = errors.New("resume refused")

// Store keeps session state. Every call is bounded by the caller's context
// and costs one Redis round trip.
type Store interface {
	// Create stores a new session and returns its resume token. The
	// plaintext token exists only in the return value.
	Create(ctx context.Context, rec Record) (resumeToken string, err error)
	// Resume checks the token (in constant time) and the user, and returns
	// the record and the stored history, oldest first. It refreshes TTLs.
	Resume(ctx context.Context, id, resumeToken, userID string) (Record, []transport.Entry, error)
	// Append adds entries to the history (trimmed to the newest max entries),
	// records the current turn and mode, and refreshes every TTL.
	Append(ctx context.Context, rec Record, entries ...transport.Entry) error
	// Sync rewrites the record and the whole history, for catching Redis up
	// after writes failed. The resume token digest is kept.
	Sync(ctx context.Context, rec Record, history []transport.Entry) error
	// AppendWithBlock is Append that also reads the user's block, in one
	// round trip.
	AppendWithBlock(ctx context.Context, rec Record, entries ...transport.Entry) (Block, error)
	// BlockUser blocks a user everywhere until b.Until; BlockOf reads it.
	BlockUser(ctx context.Context, user string, b Block) error
	BlockOf(ctx context.Context, user string) (Block, error)
	// The orchestrator's confirmations and call ledger.
	orchestrator.ConfirmStore
	orchestrator.LedgerStore
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}
