package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"
)

// Confirmation is a call waiting for the user's approval. It is bound to
// the session, the user, the tool and the exact (canonical) arguments.
type Confirmation struct {
	Token      string         `json:"token"`
	SessionID  string         `json:"sessionId"`
	UserID     string         `json:"userId"`
	Tool       string         `json:"tool"`
	ArgsDigest string         `json:"argsDigest"`
	Args       map[string]any `json:"args"` // redacted, for display only
	Turn       int            `json:"turn"`
	ExpiresAt  time.Time      `json:"expiresAt"`
	// IdempotencyKey is the action's key (idempotency.go), which its
	// approval carries to the approved run.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Epoch is the requesting connection's (Session.Epoch), which
	// ConsumeOrRequest is fenced on; it is not stored.
	Epoch int64 `json:"-"`
}

// Errors of ConfirmStore.Resolve. Callers answer the browser with them and
// never run the call.
var (
	ErrConfirmUnknown = errors.New("no such confirmation")
	ErrConfirmExpired = errors.New("confirmation expired")
)

// ConfirmStore keeps confirmations and approvals durably (they survive a
// reconnect), each operation one round trip. The writes are fenced like the
// ledger's: made with an epoch older than the session's, they change
// nothing and return ErrFenced.
type ConfirmStore interface {
	// ConsumeOrRequest consumes an approval matching c's session, user,
	// tool and argument digest and reports true with the idempotency key
	// of the confirmation that was approved ("" for one that had none);
	// an approval is used at most once. Otherwise it stores c as pending
	// and reports false. It is fenced on c.Epoch.
	ConsumeOrRequest(ctx context.Context, c Confirmation) (approved bool, key string, err error)
	// Resolve answers a pending confirmation of this session and user, as
	// the connection holding epoch. An approval is stored for the same
	// tool and arguments, valid until ttl from now. Unknown, reused, or
	// foreign tokens give ErrConfirmUnknown; late answers
	// ErrConfirmExpired.
	Resolve(ctx context.Context, sessionID string, epoch int64, userID, token string, approve bool, ttl time.Duration) (Confirmation, error)
	// Pending lists the session's confirmations still waiting for an answer.
	Pending(ctx context.Context, sessionID string) ([]Confirmation, error)
	// Revoke withdraws the user's unused approval of exactly this tool and
	// argument digest, as the connection holding epoch; none is no error.
	Revoke(ctx context.Context, sessionID string, epoch int64, userID, tool, argsDigest string) error
}

func newConfirmToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return "c_" + base64.RawURLEncoding.EncodeToString(b)
}
