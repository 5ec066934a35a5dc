package session

import (
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/pseudonym"
	"github.com/turnstile-gw/turnstile/profiles"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// Config bounds what a session may do. Zero values get the defaults noted.
type Config struct {
	StoreTimeout time.Duration // one store call; default 1 s
	// LiveConnectTimeout bounds opening a voice upstream; default 10 s.
	LiveConnectTimeout time.Duration
	HandshakeTimeout   time.Duration // time to send session.start; default 10 s
	// Profiles are the assistant profiles a session may run (nil: none,
	// every session runs the default).
	Profiles  profiles.Set
	ModelName string
	// TextProvider names the text model's provider in metrics; default
	// "gemini".
	TextProvider transport.Provider
	// GenAIProvider is the text model's gen_ai.provider.name on chat
	// spans (tracing.ProviderGemini, …); default tracing.ProviderGemini.
	GenAIProvider string
	Offline       bool // the model is the offline demo model
	// TakeoverWait bounds how long a resume waits for the connection it
	// replaces on this node to end, so that it reads that connection's
	// last writes; default 2 s.
	TakeoverWait time.Duration

	// Limits are what one connection, session or user may do, and the
	// blocks the model imposes; Assistant what the model is told, its
	// voices and profiles: the package's own settings (settings.go,
	// settings_assistant.go).
	Limits
	Assistant
	// AuthLeeway is how long past its token's expiry a connection lasts
	// without an auth refresh before it is closed 4001.
	AuthLeeway time.Duration
	// Clock is the session's one clock: token expiry timers, blocks, the
	// turn and connect limits' waits, timelines, refusal log throttles;
	// default the system clock. Liveness (pings, idle), message rates and
	// the relay's latency samples go by the system clock: they measure the
	// network, and a test's clock standing still must not stop them.
	Clock Clock
	// GoodbyeLead is how long before a drain's deadline a pinned
	// connection (a phone call) is asked to say goodbye; default 8 s.
	GoodbyeLead time.Duration
	// Node names this node in the store (its liveness marker, the live
	// index); default a random name.
	Node string
	// LiveTTL is how long this node's claim on a session counts in the
	// live index without renewal; default DefaultLiveTTL.
	LiveTTL time.Duration
	// Pseudonyms names users in timelines (the same key as traces'; the
	// same on every node for stable pseudonyms). The gateway sets it;
	// the zero Key is an empty key.
	Pseudonyms pseudonym.Key
}

// Clock is the gateway's one clock (internal/clock); tests inject one.
type Clock = clock.Clock

// Timer is a running AfterFunc.
type Timer = clock.Timer

// now is the time on the session's clock (Config.Clock).
func (m *Manager) now() time.Time { return m.cfg.Clock.Now() }

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxToolIterations, 20)
	def(&c.MaxTextChars, DefaultMaxTextChars)
	def(&c.SendQueueBytes, DefaultSendQueueBytes)
	def(&c.HistoryMax, DefaultHistoryMax)
	def(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	if c.GenAIProvider == "" {
		c.GenAIProvider = tracing.ProviderGemini
	}
	if c.TextProvider == "" {
		c.TextProvider = transport.ProviderGemini
	}
	c.Clock = clock.Or(c.Clock)
	if c.Node == "" {
		c.Node = "n_" + newSessionID()[2:]
	}
	defDur(&c.WriteTimeout, 5*time.Second)
	defDur(&c.ModelTimeout, 60*time.Second)
	defDur(&c.StoreTimeout, time.Second)
	defDur(&c.HandshakeTimeout, 10*time.Second)
	defDur(&c.LiveConnectTimeout, 10*time.Second)
	defDur(&c.TakeoverWait, 2*time.Second)
	defDur(&c.RateAbuseAfter, 10*time.Second)
	defDur(&c.GoodbyeLead, 8*time.Second)
	defDur(&c.LiveTTL, DefaultLiveTTL)
	defDur(&c.BlockMemory, DefaultBlockMemory)
	if len(c.BlockSteps) == 0 {
		c.BlockSteps = DefaultBlockSteps
	}
}
