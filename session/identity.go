package session

import (
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
)

// Identity is who a connection is, as the edge authenticated it.
type Identity struct {
	User string
	// ExpiresAt is when the token that admitted the connection expires;
	// zero when it does not (dev mode).
	ExpiresAt time.Time
	// Anonymous is true in dev mode: every connection is the same
	// anonymous user, and counts as a user of its own for the per-user
	// limits.
	Anonymous bool
	// ClientIP is the browser's address (behind trusted proxies, the one
	// they forwarded); every log line of the connection carries it.
	ClientIP string
	// Channel is what the connection is, for metrics and logs: a browser
	// (ChannelBrowser, the default) or a phone carrier
	// (metrics.ChannelTwilio).
	Channel metrics.Channel
	// Prompt is added to the voice system instruction (how a phone caller
	// answers confirmations, say).
	Prompt string
	// Pinned is a connection that cannot move to another node (a phone
	// call): a drain keeps it until it ends, and asks the model to say
	// goodbye before the drain's deadline.
	Pinned bool
	// Claims are the token's claims forwarded to tools
	// (TURNSTILE_TOOL_CLAIMS); nil when none.
	Claims tools.Claims
	// Facts are the token's claims the model is told as facts about the
	// user (TURNSTILE_CONTEXT_CLAIMS); nil when none.
	Facts tools.Claims
	// Profile is the token's profile claim ("" none): the profile its
	// sessions run. Profiles is its profiles claim: the ones session.start
	// may pick.
	Profile  string
	Profiles []string
}

// ChannelBrowser is a browser's Identity.Channel.
const ChannelBrowser = metrics.ChannelBrowser

// TokenVerifier checks an access token and says whom it names and until
// when (the edge's authenticator is one).
type TokenVerifier interface {
	Verify(token string) (Identity, error)
}
