// Package geminilive adapts Gemini's realtime API (Live.Connect of
// google.golang.org/genai, the BidiGenerateContent WebSocket) to the
// provider-neutral transport.LiveModel: it opens audio sessions with
// transcription, tools, context-window compression and session resumption,
// and hides the SDK's sharp edges (a Connect that ignores its context, a
// Session that is not safe for concurrent sends, a Receive that must not be
// called again after an error).
package geminilive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
)

// Defaults for the zero values of Options.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultSendQueue      = 256
)

// Options tune a Model. Every zero value means the default.
type Options struct {
	// ConnectTimeout bounds Connect: dial, setup and history seeding.
	// Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// SendQueue is how many outgoing messages (audio chunks, texts, tool
	// responses) may wait for the upstream before sends fail with
	// transport.ErrBackpressure. Default DefaultSendQueue.
	SendQueue int
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
}

// Model opens Gemini Live sessions for one model.
type Model struct {
	client *genai.Client
	name   string
	opts   Options
}

// New returns a realtime model backed by client, whose HTTPOptions.BaseURL
// must be a ws:// or wss:// URL (the SDK turns http:// into wss://). name is
// the model id, e.g. "gemini-2.5-flash-native-audio-preview-12-2025".
func New(client *genai.Client, name string, opts Options) *Model {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = DefaultSendQueue
	}
	return &Model{client: client, name: name, opts: opts}
}

var _ transport.LiveModel = (*Model)(nil)

// Name is the model id.
func (m *Model) Name() string { return m.name }

// ErrConnectTimeout means the upstream did not complete its setup within
// Options.ConnectTimeout.
var ErrConnectTimeout = errors.New("gemini live: connect timed out")

// Connect implements transport.LiveModel. It returns once the upstream has
// confirmed the setup and the history (when not resuming) has been sent, or
// fails after Options.ConnectTimeout or when ctx ends. The SDK's dial and
// setup cannot be interrupted, so a Connect that gave up leaves one
// goroutine waiting for the SDK; that goroutine closes the session if it
// arrives late and ends when the upstream answers or drops the connection
// (the SDK caps the WebSocket handshake at 45 s but not the setup reply).
func (m *Model) Connect(ctx context.Context, cfg transport.LiveConfig) (transport.LiveSession, error) {
	lc := m.connectConfig(cfg)
	var seed []*genai.Content
	if cfg.ResumeHandle == "" {
		seed = liveHistory(cfg.History)
	}

	type result struct {
		up  *genai.Session
		err error
	}
	got := make(chan result)         // unbuffered: a send succeeds only while Connect still waits
	abandoned := make(chan struct{}) // closed when Connect gives up
	go func() {
		up, err := m.client.Live.Connect(ctx, m.name, lc)
		if err == nil && len(seed) > 0 {
			// Still before any other goroutine can touch up.
			err = up.SendClientContent(genai.LiveClientContentInput{Turns: seed, TurnComplete: genai.Ptr(false)})
			if err != nil {
				_ = up.Close()
				err = fmt.Errorf("seed history: %w", err)
			}
		}
		select {
		case got <- result{up, err}:
		case <-abandoned:
			if err == nil {
				_ = up.Close()
			}
		}
	}()

	timer := time.NewTimer(m.opts.ConnectTimeout)
	defer timer.Stop()
	select {
	case r := <-got:
		if r.err != nil {
			// A refused setup (bad key, unknown resumption handle) arrives
			// as a close frame: surface its code like a session's end.
			if ce := closeError(r.err); ce != nil {
				return nil, fmt.Errorf("gemini live: connect %s: %w", m.name, ce)
			}
			return nil, fmt.Errorf("gemini live: connect %s: %w", m.name, r.err)
		}
		return start(r.up, m.opts.SendQueue), nil
	case <-timer.C:
		close(abandoned)
		return nil, fmt.Errorf("gemini live: connect %s after %v: %w", m.name, m.opts.ConnectTimeout, ErrConnectTimeout)
	case <-ctx.Done():
		close(abandoned)
		return nil, fmt.Errorf("gemini live: connect %s: %w", m.name, ctx.Err())
	}
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
