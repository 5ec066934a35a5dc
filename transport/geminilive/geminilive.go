// Package geminilive adapts Gemini's realtime API (the BidiGenerateContent
// WebSocket that google.golang.org/genai's Live.Connect speaks) to the
// provider-neutral transport.LiveModel. It opens audio sessions with
// transcription, tools, context-window compression and session resumption,
// on the Gemini API (an API key) or on Vertex AI (project, location and an
// OAuth access token from the client's credentials).
//
// It speaks the wire itself, on internal/wsbuf's client (github.com/gobwas/ws
// framing), because the SDK's session costs more than the rest of a voice
// session together: it decodes every server message into a map,
// re-encodes and decodes it again, and marshals every 20 ms audio chunk
// through maps. Here the control
// messages are still genai's types (encoded with encoding/json, the same
// JSON the SDK sends), microphone audio is base64-appended into a reused
// frame, and model audio is decoded straight from the frame into a reused
// PCM buffer (both with internal/audiob64's SIMD base64); anything else falls back to decoding genai.LiveServerMessage.
// A session starts no goroutines: its owner's goroutine calls Recv, and
// sends are direct writes.
package geminilive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/evloop"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/transport"
)

// Defaults for the zero values of Options.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultWriteTimeout   = 5 * time.Second
	// DefaultReadLimit bounds one server message. Model audio comes in
	// chunks of tens of kilobytes; the limit only guards against a runaway
	// peer (the SDK has none).
	DefaultReadLimit = 16 << 20
)

// Options tune a Model. Every zero value means the default.
type Options struct {
	// ConnectTimeout bounds Connect: dial, setup and history seeding.
	// Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// WriteTimeout bounds every write to the upstream: a write gets at
	// least this long and at most twice it (see wsbuf.Client). A write that
	// times out ends the connection: an upstream that has not taken a frame
	// for this long is not keeping up with a live conversation. Default
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// ReadLimit is the largest server message accepted, in bytes; a larger
	// one ends the connection. Default DefaultReadLimit.
	ReadLimit int64
	// Voice is a prebuilt voice name (e.g. "Kore"); "" lets the model pick.
	Voice string
	// TriggerTokens and TargetTokens tune context-window compression (a
	// sliding window), which is on unless NoCompression is set. Zero leaves
	// the server's defaults: trigger at 80% of the model's context window,
	// shrink to half the trigger.
	TriggerTokens, TargetTokens int64
	// NoCompression turns context-window compression off, which caps an
	// audio session at about 15 minutes.
	NoCompression bool
	// Loops, when set, serve connections from event loops, the one
	// LiveConfig.Affinity picks (Linux; internal/evloop): the session is
	// then a transport.LiveFast. Over wss:// (Google's), TLS is fed by
	// the loop; through an https proxy the connection is served as
	// without it.
	Loops *evloop.Pool
}

// Model opens Gemini Live sessions for one model.
type Model struct {
	name  string
	opts  Options
	ep    endpoint
	epErr error // the client's configuration cannot reach Live
	dial  wsbuf.DialOptions
}

// New returns a realtime model that connects where client's Live.Connect
// would: its HTTPOptions.BaseURL must be a ws:// or wss:// URL for a plain
// or TLS endpoint (like the SDK, an http:// base URL is dialled as wss://),
// with its API key and API version. On the Vertex AI backend the client
// needs a project, a location and credentials (application default
// credentials or its own): every Connect asks the credentials for an
// access token (cached and refreshed by them) and sends it as a bearer
// token, and setup names the model by its full resource name. Otherwise
// Connect fails. name is the model id, e.g.
// "gemini-2.5-flash-native-audio-preview-12-2025".
func New(client *genai.Client, name string, opts Options) *Model {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = DefaultReadLimit
	}
	ep, err := newEndpoint(client.ClientConfig(), name)
	return &Model{name: name, opts: opts, ep: ep, epErr: err, dial: dialOptions(opts)}
}

var _ transport.LiveModel = (*Model)(nil)

// Name is the model id.
func (m *Model) Name() string { return m.name }

// ErrConnectTimeout means the upstream did not complete its setup within
// Options.ConnectTimeout.
var ErrConnectTimeout = errors.New("gemini live: connect timed out")

// Connect implements transport.LiveModel: it dials, sends the setup, waits
// for setupComplete and seeds the history (unless resuming), and returns
// the session. It fails after Options.ConnectTimeout or when ctx ends, with
// the connection closed and nothing left running. A refused setup (a bad
// key, an unknown resumption handle) arrives as a close frame and fails
// with its *transport.CloseError.
func (m *Model) Connect(ctx context.Context, cfg transport.LiveConfig) (transport.LiveSession, error) {
	if m.epErr != nil {
		return nil, fmt.Errorf("gemini live: connect %s: %w", m.name, m.epErr)
	}
	setup, err := m.setupMessage(cfg)
	if err != nil {
		return nil, fmt.Errorf("gemini live: connect %s: setup: %w", m.name, err)
	}
	var seed []byte
	if cfg.ResumeHandle == "" {
		if turns := liveHistory(cfg.History); len(turns) > 0 {
			if seed, err = clientContent(turns, false); err != nil {
				return nil, fmt.Errorf("gemini live: connect %s: seed history: %w", m.name, err)
			}
		}
	}

	cctx, cancel := context.WithTimeoutCause(ctx, m.opts.ConnectTimeout, ErrConnectTimeout)
	defer cancel()
	var loop *evloop.Loop
	if m.opts.Loops != nil {
		loop = m.opts.Loops.Loop(cfg.Affinity)
	}
	s, err := m.open(cctx, setup, seed, loop)
	if err != nil {
		if cctx.Err() != nil {
			err = context.Cause(cctx)
			if errors.Is(err, ErrConnectTimeout) {
				return nil, fmt.Errorf("gemini live: connect %s after %v: %w", m.name, m.opts.ConnectTimeout, err)
			}
		}
		return nil, fmt.Errorf("gemini live: connect %s: %w", m.name, err)
	}
	return s, nil
}

// open runs the connect sequence under ctx: ending ctx closes the
// connection, which fails whatever step is waiting.
func (m *Model) open(ctx context.Context, setup, seed []byte, loop *evloop.Loop) (*Session, error) {
	header, err := m.ep.handshakeHeader(ctx)
	if err != nil {
		return nil, err
	}
	o := m.dial
	o.Header, o.Loop = header, loop
	conn, err := wsbuf.Dial(ctx, m.ep.url, o)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err) // a refused handshake says its HTTP status
	}
	s := newSession(conn, m.opts.WriteTimeout)

	// The session's reads and writes take no context (see Session); during
	// the connect sequence, ctx ending closes the connection instead.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = s.Close()
	})
	err = s.handshake(setup, seed)
	if !stop() {
		<-fired // the session is closed; let the closer finish
		return nil, ctx.Err()
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// BaseURL is the base URL the genai Live client needs for a
// Gemini-compatible endpoint given by its REST base URL (GEMINI_BASE_URL):
// http becomes ws and https wss, since given an http URL the SDK would dial
// wss. "" stays "" (Google's endpoint).
func BaseURL(restBase string) string {
	if rest, ok := strings.CutPrefix(restBase, "http://"); ok {
		return "ws://" + rest
	}
	if rest, ok := strings.CutPrefix(restBase, "https://"); ok {
		return "wss://" + rest
	}
	return restBase
}

// Voices are the prebuilt voices of Gemini's Live models (the native-audio
// models speak all thirty, the half-cascade ones the first eight): the
// default of TURNSTILE_LIVE_VOICES.
var Voices = []string{"Puck", "Charon", "Kore", "Fenrir", "Aoede", "Leda", "Orus", "Zephyr",
	"Achernar", "Achird", "Algenib", "Algieba", "Alnilam", "Autonoe", "Callirrhoe", "Despina", "Enceladus",
	"Erinome", "Gacrux", "Iapetus", "Laomedeia", "Pulcherrima", "Rasalgethi", "Sadachbia", "Sadaltager",
	"Schedar", "Sulafat", "Umbriel", "Vindemiatrix", "Zubenelgenubi"}
