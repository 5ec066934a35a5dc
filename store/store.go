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
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// Record is the durable part of a session, kept in Redis under
// turnstile:{<id>}:meta. The resume token itself is never stored: only its
// SHA-256 digest, so that reading Redis does not let anyone resume.
type Record struct {
	ID              string
	UserID          string
	Mode            protocol.Mode
	Turn            int    // number of the last turn started
	RegistryVersion string // tool registry version pinned at creation
	CreatedAt       time.Time
	// PendingMessage is a SET_PENDING_MESSAGE intent's message, delivered to
	// the model at the next turn.
	PendingMessage string
	// ResumeHandle is the newest resumable handle of the session's voice
	// upstream, so that any node can resume it.
	ResumeHandle string
	// Epoch is the generation of the session's owner: Create makes the
	// first, each Resume takes the next. A write that carries an older
	// epoch is refused with ErrFenced, so that one connection at a time,
	// on any node, writes the conversation.
	Epoch int64
	// TokenHash is the stored SHA-256 (hex) of the resume token, never the
	// token: a node keeps it so that it can write the session back whole
	// (Restore) after Redis lost it.
	TokenHash string
	// Context is the page context session.start carried (compact JSON,
	// protocol.CleanContext), "" when none: untrusted, kept so that a
	// resumed session tells the model the same.
	Context string
	// Profile is the assistant profile the session runs ("" the default);
	// Voice and LanguageCode are the session's own asks ("" none). A
	// resumed session keeps them.
	Profile, Voice, LanguageCode string
	// Handoff is set while the session is handed to a person
	// (request_human): the user's messages are stored, not sent to the
	// model, until an operator hands it back (handoff.go).
	Handoff Handoff
}

// ErrResumeRefused is returned by Store.Resume for an unknown or expired
// session, a wrong token, or a token of another user. Callers must not tell
// these cases apart to the client.
var ErrResumeRefused = errors.New("resume refused")

// ErrFenced is returned by a write whose record carries an older epoch than
// the stored one: another connection resumed the session and owns it now.
// Nothing was written. It is not a store failure. The orchestrator's ledger
// and confirmation writes return the same error (orchestrator.ErrFenced).
var ErrFenced = orchestrator.ErrFenced

// ErrSessionGone is returned by a write when the session's record is not in
// Redis any more (Redis restarted empty, was flushed, or the keys expired),
// or was written back by an older owner meanwhile. Nothing was written; the
// owner writes the session back whole (Restore).
var ErrSessionGone = errors.New("session record missing from the store")

// Store keeps session state. Every call is bounded by the caller's context
// and costs one Redis round trip.
type Store interface {
	// Create stores a new session and returns it as stored (first epoch,
	// token digest) with its resume token. The plaintext token exists only
	// in the return value.
	Create(ctx context.Context, rec Record) (Record, string, error)
	// Resume checks the token and the user and takes ownership of the
	// session: the next epoch, announced to every node (see Watch). It
	// returns the record and the stored history, oldest first, as of that
	// moment, and refreshes TTLs.
	Resume(ctx context.Context, id, resumeToken, userID string) (Record, []transport.Entry, error)
	// Append adds entries to the history (trimmed to the newest entries
	// within the count and byte bounds), records the current turn and
	// mode, and refreshes every TTL, if rec.Epoch still owns the session
	// (else ErrFenced; ErrSessionGone when the record is gone).
	Append(ctx context.Context, rec Record, entries ...transport.Entry) error
	// AppendWithBlock is Append that also reads the user's block, in one
	// round trip.
	AppendWithBlock(ctx context.Context, rec Record, entries ...transport.Entry) (Block, error)
	// EndTurn is AppendWithBlock that also writes the turn's timeline
	// entries and puts the turn's entry on the event stream, in the same
	// round trip.
	EndTurn(ctx context.Context, rec Record, end TurnEnd) (Block, error)
	// Leave writes a connection's last timeline events and takes the
	// session out of the live index; MarkLive renews node's sessions
	// there.
	Leave(ctx context.Context, rec Record, node string, events [][]byte) error
	MarkLive(ctx context.Context, node string, ids []string, ttl time.Duration) error
	// BeginTurn appends a turn's user entry, reads the user's block and
	// counts the turn against lim, in one round trip. A turn the limit or
	// the block refuses must be taken back with Undo.
	BeginTurn(ctx context.Context, rec Record, user transport.Entry, lim TurnLimit) (TurnStart, error)
	// CountTurn counts a turn against lim alone (input that writes no
	// entry yet, such as typed text in voice).
	CountTurn(ctx context.Context, lim TurnLimit, member string) (allowed bool, retryAfter time.Duration, err error)
	// CountLimits counts one event against every limit in lims in one
	// round trip (each window on its own hash tag). It is allowed when
	// every window allows it; retryAfter is then 0, else the longest wait
	// of the windows that refused. A window that allowed it counts it even
	// when another refused (the count errs on the safe side).
	CountLimits(ctx context.Context, member string, lims ...TurnLimit) (allowed bool, retryAfter time.Duration, err error)
	// UncountLimits takes back what CountLimits counted under member.
	UncountLimits(ctx context.Context, member string, lims ...TurnLimit) error
	// Undo takes back the user entry of turn (the last one written) and
	// writes rec (whose turn is the one before), as Append does.
	Undo(ctx context.Context, rec Record, turn int) error
	// Restore writes the session back whole: the record with its user,
	// token digest and epoch, the history and the pending confirmations.
	// It reports whether the record was missing (a restoration). ErrFenced
	// when a newer epoch owns the session.
	Restore(ctx context.Context, rec Record, history []transport.Entry, pending []orchestrator.Confirmation) (restored bool, err error)
	// Epochs returns the stored epoch of each session, 0 for a session
	// whose record is missing.
	Epochs(ctx context.Context, ids []string) ([]int64, error)
	// Watch tells w of ownership changes and of Redis coming back (or
	// losing its data) until ctx ends; it is the node's one subscription.
	Watch(ctx context.Context, node string, w Watcher) error
	// MarkerGone reports whether Redis lost node's marker since its Watch
	// set it (Redis lost its data; Watch may not have noticed yet, or its
	// Watcher's Lost has not returned: asked after MarkerGone said false,
	// what Lost recorded is in place).
	MarkerGone(ctx context.Context, node string) (bool, error)
	// BlockUser blocks a user everywhere until b.Until; BlockOf reads it.
	BlockUser(ctx context.Context, user string, b Block) error
	BlockOf(ctx context.Context, user string) (Block, error)
	// Strike counts one more block the model imposed on user and returns
	// how many the user has had, this one included, since memory passed
	// without one (the count escalates the next block's length).
	Strike(ctx context.Context, user string, memory time.Duration) (int, error)
	// StartCooldown records a rate abuse of user and returns the cooldown
	// it earned (escalating on repeats); CooldownLeft reads what is left.
	StartCooldown(ctx context.Context, user string, p CooldownPolicy) (Cooldown, error)
	CooldownLeft(ctx context.Context, user string) (time.Duration, error)
	// The orchestrator's confirmations and call ledger.
	orchestrator.ConfirmStore
	orchestrator.LedgerStore
	// HandOff records a session's hand-off to a person (handoff.go).
	HandOff(ctx context.Context, rec Record, h Handoff, event, record []byte) error
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// TurnLimit bounds the turns one user starts per window, across nodes.
type TurnLimit struct {
	// Key is whose turns count: the user (in dev mode, one per
	// connection).
	Key    string
	Max    int // turns per Window; 0: no limit
	Window time.Duration
	// QuotaExempt: the turn's entry is counted against the user's storage
	// quota but not refused for it (the gateway's own turns, such as a
	// confirmation's outcome).
	QuotaExempt bool
	// Kind names what is counted, the window key's last part: "" for
	// turns, KindSessions for new sessions.
	Kind string
}

// TurnLimit kinds besides turns.
const (
	// KindSessions counts the new sessions a user starts.
	KindSessions = "sessions"
	// KindVoiceStarts counts a session's moves into voice: Key is the
	// session ID, and the window is one of the session's keys.
	KindVoiceStarts = "voice_starts"
	// KindLiveConnects counts the Live upstream connections opened for a
	// session (every reason): Key is the session ID, and the window is one
	// of the session's keys.
	KindLiveConnects = "live_connects"
	// KindUserLiveConnects counts the Live upstream connections opened for
	// a user's sessions, on every node.
	KindUserLiveConnects = "user_live_connects"
	// KindResumes counts a user's resumes; KindResumes+":"+<session ID>
	// one session's resumes by that user (on the user's tag, so that
	// nobody but the session's owner can use up its window).
	KindResumes = "resumes"
)

// TurnStart is what BeginTurn learned besides writing the entry.
type TurnStart struct {
	Block Block
	// Allowed is false when the turn limit refused the turn; RetryAfter
	// is then how long until a turn is allowed again.
	Allowed    bool
	RetryAfter time.Duration
	// OverQuota is true when the user's storage quota had no room for the
	// turn's entry (Redis.UserStorageBytes); StoredBytes is then what the
	// user's sessions hold.
	OverQuota   bool
	StoredBytes int64
}

// Watcher hears what Watch learns.
type Watcher interface {
	// Owner says that a resume (on any node) made epoch the owner of the
	// session.
	Owner(sessionID string, epoch int64)
	// Closed says that an operator closed the session (it may not be
	// resumed any more).
	Closed(sessionID string)
	// BlockChanged says that the user's block was set (by an operator or
	// the model, on any node) or lifted (by an operator). b is the block
	// set when the announcement carried it; nil for a lift, or a block
	// announced by a node of an earlier version: then the watcher reads
	// the block (BlockOf).
	BlockChanged(user string, b *Block)
	// HandedBack says that an operator handed the session back to the
	// model (EndHandoff).
	HandedBack(sessionID string)
	// Check asks to compare the live sessions with the store: Redis
	// answers again after failing, or has lost its data, or the
	// subscription was re-established (announcements may have been
	// missed).
	Check()
	// Lost says that Redis lost its data (restarted empty, flushed): the
	// node's marker vanished. Check follows.
	Lost()
}
