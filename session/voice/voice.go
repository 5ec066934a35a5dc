// Package voice is a session's realtime side while it is in voice mode: the
// upstream Live connection (replaced on goAway or failure without the
// browser noticing), voice turns from the model's events, barge-in, tool
// rounds through the orchestrator's Round, voice intents, and the way back
// to text. It reaches the session only through Host, so it is tested with a
// fake host and a fake upstream.
//
// Goroutines: one pump per Session, the only caller of the upstream's Recv;
// tool rounds run on goroutines of their own while they last. Sends to the
// upstream come from the pump, the tool rounds and the session's browser
// reader (microphone audio); the upstream serialises them. All state is
// guarded by one mutex.
package voice

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/audio"
	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/turnrec"
	"github.com/turnstile-gw/turnstile/transport"
)

// Host is the session as its voice side sees it. Its methods must not call
// back into the Session synchronously, except Block and End.
type Host interface {
	// Send queues one event for the browser.
	Send(ev protocol.Event)
	// SendAudio sends model audio to the browser: written on the caller's
	// goroutine when nothing is queued before it (so it may block while
	// the browser's socket is full, up to the host's limit), else queued
	// as a copy; pcm is not kept. False means the browser is too slow and
	// the host is closing it.
	// received, when not zero, is when the pump received it: a sample for
	// turnstile_relay_added_seconds{direction="out"}, taken when written.
	SendAudio(pcm []byte, received time.Time) bool
	// AudioWontWait reports whether SendAudio would not wait for the
	// browser's socket now (it is served by an event loop): model audio may
	// then be sent from the upstream's loop (transport.LiveFast).
	AudioWontWait() bool
	// DropAudio drops the model audio still queued (barge-in).
	DropAudio()
	// AudioDrained is a channel closed once the browser has been sent all
	// the model audio queued for it (at once when none is queued).
	AudioDrained() <-chan struct{}
	// ToolEvents shows a turn's tool calls to the browser.
	ToolEvents(turn int) orchestrator.Events
	// BeginTurn starts the session's next turn and returns its number.
	BeginTurn() int
	// SaveHandle stores the newest resumption handle, off the audio path.
	SaveHandle(handle string)
	// TakePending returns and clears a SET_PENDING_MESSAGE waiting for the
	// next turn.
	TakePending() string
	// History is the conversation so far, to seed a new upstream.
	History() []transport.Entry
	// BlockUser and SetPendingMessage are the session-level intents.
	BlockUser(d time.Duration, reason string)
	SetPendingMessage(msg string)
	// HandOff hands the conversation to a person (request_human), in
	// turn; the voice side then ends after the current answer.
	HandOff(turn int, reason, summary string)
	// IntentApplied reports an intent for logs and metrics.
	IntentApplied(turn int, typ intents.Type, applied bool)
	// Ended says that voice is over and the session is back in text
	// (reason: "client", "end_voice_session", "blocked").
	Ended(reason string)
	// Lost says that the upstream could not be restored.
	Lost(err error)
}

// Defaults of Config.
const (
	// DefaultMicBuffer bounds the microphone audio kept while the upstream
	// is replaced: 10 s of 16 kHz PCM16, longer than a resume takes.
	DefaultMicBuffer = 10 * 16000 * 2
	// DefaultDrainMax bounds how long the way back to text waits for the
	// goodbye's audio to reach the browser.
	DefaultDrainMax = 30 * time.Second
	// DefaultReconnectAttempts and DefaultReconnectDelay: an upstream that
	// failed is reopened this many times, the delay doubling from the
	// first, before the browser is told to reconnect (4102). Three tries
	// over ~700 ms ride out a blip without keeping a user in silence.
	DefaultReconnectAttempts = 3
	DefaultReconnectDelay    = 100 * time.Millisecond
	// RelaySampleEvery is the sampling of turnstile_relay_added_seconds:
	// one audio frame in this many per session and direction is timed, so
	// that the relay pays for a clock read on one frame in eight (about
	// every 160 ms of 20 ms frames) and nothing on the others.
	RelaySampleEvery = 8
)

// Config is what every voice side of a session is run with. Zero values get
// the defaults.
type Config struct {
	System            string // the voice system instruction
	Tools             []transport.ToolDecl
	ConnectTimeout    time.Duration // opening one upstream; default 10 s
	MicBuffer         int           // bytes; default DefaultMicBuffer
	DrainMax          time.Duration // default DefaultDrainMax
	ReconnectAttempts int           // default DefaultReconnectAttempts
	ReconnectDelay    time.Duration // default DefaultReconnectDelay
	// Voice and LanguageCode go into the Live setup's speech config ("":
	// the model's own).
	Voice, LanguageCode string
	// Affinity picks the event loop of an adapter that serves
	// connections from event loops (transport.LiveConfig.Affinity).
	Affinity uint64
}

func (c *Config) defaults() {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.MicBuffer <= 0 {
		c.MicBuffer = DefaultMicBuffer
	}
	if c.DrainMax <= 0 {
		c.DrainMax = DefaultDrainMax
	}
	if c.ReconnectAttempts <= 0 {
		c.ReconnectAttempts = DefaultReconnectAttempts
	}
	if c.ReconnectDelay <= 0 {
		c.ReconnectDelay = DefaultReconnectDelay
	}
}

// Deps are what a voice side talks to.
type Deps struct {
	Live transport.LiveModel
	// Turns begin every voice turn as text turns begin (its policy turn,
	// its trace); turnrec.Turn.End records each, as it records text turns.
	Turns   turnrec.Deps
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Clock is the session's clock: it times the drain of the goodbye's
	// audio (Config.DrainMax) and the voice-to-voice latency (from Mic's
	// and AudioEnd's end of speech to the answer); nil: the system clock.
	Clock clock.Clock
	// Budget is asked before every upstream open; nil: no budget.
	Budget Budget
}

// Budget is the session's upstream-connect budget: every open of a Live
// connection, whatever its reason, takes a place in it.
type Budget interface {
	// AllowConnect takes one open for reason; false refuses it (the
	// budget tells the browser and counts the refusal).
	AllowConnect(reason metrics.ConnectReason) bool
}

// ErrConnectRefused means the upstream-connect budget refused an open:
// voice does not start, or ends, and the session stays in text.
var ErrConnectRefused = errors.New("voice: upstream connect budget used up")

// EndRateLimited is the reason voice ends when the upstream could not be
// replaced within the connect budget.
const EndRateLimited = "rate_limited"

// Session is the voice side of one session.
//
// Its first two cache lines are the voice path's: every microphone chunk
// (Mic) and every model-audio chunk (the pump's onEvent) reads and writes
// the Session there and nowhere else — the mutex, what is checked under it
// per chunk and the upstream on the first line, the speech mark and the
// host on the second — rather than on five lines of it and four
// (TestSessionKeepsTheVoicePathOnTwoCacheLines). A Session is 64-byte
// aligned (its size class, 704 bytes, is a multiple of 64).
type Session struct {
	mu       sync.Mutex            // guards the fields below it, up to the next comment that says otherwise
	closed   bool                  // the upstream was closed on purpose
	swapping bool                  // the upstream is being replaced: microphone audio is buffered
	speaking bool                  // between cur's first model output and its turnComplete
	drain    bool                  // let the answer's audio out before closing
	stopped  bool                  // the connection is going away: nobody is told
	wantSwap bool                  // goAway seen: replace at the next resumable moment
	upFast   bool                  // up's sends never wait (transport.LiveFast): Mic may run on an event loop
	hostFast bool                  // the host's SendAudio never waits (it said so once: AudioWontWait)
	ending   string                // why voice is ending; "" while it is not
	up       transport.LiveSession // Mic's sends
	cur      *turn                 // the turn the model's output belongs to; nil between turns
	// modelAudio counts the model's audio chunks, for the out-relay
	// sampling; the pump's alone, not guarded by mu.
	modelAudio uint

	// speech is the end of the user's speech not answered yet (mu).
	speech speechEnd
	h      Host          // not guarded: set once
	handle string        // newest resumable handle
	open   []*turn       // turns not finalized yet (cur, and completed ones awaiting their calls)
	idle   chan struct{} // closed when open empties; nil while nobody waits (Idle)
	// finishing counts turns out of open whose turn.done is not queued yet.
	finishing int
	deferred  []userTurn
	buffered  [][]byte
	bufBytes  int
	// traceNotes are upstream events (goAway, resume) that came between
	// turns, for the next turn's span.
	traceNotes []traceNote

	// Set once, at Start; not guarded.
	cfg Config
	d   Deps
	// channel labels the voice side's metrics: the session's
	// (d.Turns.Conversation's), read once.
	channel metrics.Channel

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the pump and the tool rounds have ended
	rounds sync.WaitGroup
	drops  throttle.Log // microphone audio the upstream refused, in bytes
	// response observes each turn's voice-to-voice latency.
	response prometheus.Observer
}

// turn is one voice turn: from its first event to its turnComplete, and
// until every call made in it is answered or cancelled.
type turn struct {
	// Turn is the turn's number, policy and trace (its Ctx is v.ctx's with
	// the turn's root span): its tool rounds run, and its log lines are
	// written, with its Ctx.
	*turnrec.Turn
	in, out                           strings.Builder
	gateway                           string // input the gateway wrote (a confirmation outcome)
	interrupted                       bool
	suppressAudio, suppressTranscript bool
	terminal                          *orchestrator.End // a terminal tool's answer, shown as text.done
	completed                         bool              // turnComplete arrived
	// began is when the model's output began (its first event); voiced
	// says its first audio reached the browser, response how long after
	// the end of the user's speech (0: unknown).
	began     time.Time
	voiced    bool
	response  time.Duration
	rounds    int // tool rounds still running
	failed    bool
	finalized bool
}

// quiet reports whether nothing more of the turn's model output may reach
// the browser.
func (t *turn) quiet() bool { return t.interrupted || t.terminal != nil }

// dropReason is why the turn's model audio is not played, as the label of
// turnstile_voice_audio_dropped_seconds_total; "" when it is played.
func (t *turn) dropReason() metrics.VoiceDrop {
	switch {
	case t.interrupted:
		return metrics.DropInterrupted
	case t.terminal != nil:
		return metrics.DropTerminal
	case t.suppressAudio:
		return metrics.DropSuppressAudio
	}
	return ""
}

// ModelAudioBytesPerSecond is the Live model's output: PCM16 mono at
// 24 kHz.
const ModelAudioBytesPerSecond = 24000 * 2

// userTurn is input for the model that waits until it stops speaking: a
// clientContent sent mid-answer would cut the answer off.
type userTurn struct {
	text string
	kind string // "" typed by the user; "confirmation", "notice" written by the gateway
}

// Start opens the upstream (resuming handle when it is not "", else a new
// one seeded with the history) and starts the pump. ctx is the connection's;
// reason is why voice starts (voice_start or resume). ErrConnectRefused
// when the connect budget refused the open.
func Start(ctx context.Context, cfg Config, d Deps, h Host, handle string, reason metrics.ConnectReason) (*Session, error) {
	cfg.defaults()
	d.Clock = clock.Or(d.Clock)
	v := &Session{cfg: cfg, d: d, h: h, channel: d.Turns.Conversation.Session().Channel, done: make(chan struct{})}
	if d.Metrics != nil {
		v.response = d.Metrics.VoiceResponseObserver(v.channel)
	}
	v.ctx, v.cancel = context.WithCancel(ctx)
	up, resumed, err := v.connect(handle, reason)
	if err != nil {
		v.cancel()
		return nil, err
	}
	v.up, v.upFast = up, sendsNeverWait(up)
	if resumed {
		v.handle = handle
	}
	go v.run()
	return v, nil
}

// Resumed reports whether the upstream continues an earlier Live session.
func (v *Session) Resumed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.handle != ""
}

// Handle is the newest resumable handle ("" when there is none).
func (v *Session) Handle() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.handle
}

// Done is closed when the voice side has ended completely.
func (v *Session) Done() <-chan struct{} { return v.done }

// Busy reports whether a turn is under way (the model is answering, or a
// call of a finished turn is still running).
func (v *Session) Busy() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.busyLocked()
}

// busyLocked is Busy with v.mu held.
func (v *Session) busyLocked() bool { return len(v.open) > 0 || v.finishing > 0 }

// Idle is a channel closed once no turn is under way (at once when none
// is): a drain waits on it, with Done, instead of polling Busy.
func (v *Session) Idle() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.busyLocked() {
		return closedChan
	}
	if v.idle == nil {
		v.idle = make(chan struct{})
	}
	return v.idle
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Mic forwards one chunk of microphone audio (PCM16LE 16 kHz; not kept
// after Mic returns), read at now. While the upstream is replaced it is
// buffered (bounded); while voice ends it is dropped: barge-in is locked
// out. It reports whether the chunk was written upstream. A chunk with
// speech in it (audio.Loud) marks the end of the user's speech so far.
func (v *Session) Mic(now time.Time, pcm []byte) bool {
	loud := audio.Loud(pcm)
	v.mu.Lock()
	if v.ending != "" || v.closed {
		v.mu.Unlock()
		return false
	}
	if loud {
		v.speech.mark(now)
	}
	if v.swapping {
		v.bufferLocked(pcm)
		v.mu.Unlock()
		return false
	}
	up := v.up
	v.mu.Unlock()
	if err := up.SendAudio(pcm); err != nil {
		v.mu.Lock()
		if v.swapping {
			// The upstream was being replaced while this chunk went out.
			v.bufferLocked(pcm)
			v.mu.Unlock()
			return false
		}
		v.mu.Unlock()
		if n, ok := v.drops.Note(now, len(pcm)); ok {
			v.d.Log.Warn("voice: microphone audio dropped", "err", err, "dropped_bytes", n)
		}
		return false
	}
	return true
}

// MicWontWait reports whether Mic would not wait for the network now: the
// upstream's sends never wait (it is served by an event loop,
// transport.LiveFast), or microphone audio is being buffered for a new
// one.
func (v *Session) MicWontWait() bool {
	onLoop, known := v.UpstreamOnLoop()
	return onLoop || !known
}

// UpstreamOnLoop reports whether the upstream's sends never wait (it is
// served by an event loop); known is false while it is being replaced.
func (v *Session) UpstreamOnLoop() (onLoop, known bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.upFast, !v.swapping
}

// sendsNeverWait reports whether up's sends never wait for the network.
func sendsNeverWait(up transport.LiveSession) bool {
	f, ok := up.(transport.LiveFast)
	return ok && !f.SendsWait()
}

// bufferLocked keeps a copy of pcm for the new upstream, dropping the
// oldest audio beyond the bound.
func (v *Session) bufferLocked(pcm []byte) {
	for v.bufBytes+len(pcm) > v.cfg.MicBuffer && len(v.buffered) > 0 {
		v.bufBytes -= len(v.buffered[0])
		v.buffered = v.buffered[1:]
	}
	v.buffered = append(v.buffered, append([]byte(nil), pcm...))
	v.bufBytes += len(pcm)
}

// AudioEnd tells the upstream that the microphone paused; after speech,
// the user's speech ends here (a client's own voice detection decided so).
func (v *Session) AudioEnd() {
	v.mu.Lock()
	v.speech.clientEnd(v.d.Clock.Now())
	v.mu.Unlock()
	if up := v.upstream(); up != nil {
		_ = up.SendAudioEnd()
	}
}

// Text sends a message the user typed. It joins the current turn, or
// starts one; while the model speaks it waits for the turn's end.
func (v *Session) Text(text string) { v.userInput(userTurn{text: text}) }

// Confirmed tells the model the outcome of a confirmation, as a user turn,
// at once when it is not speaking, else right after its turn ends.
func (v *Session) Confirmed(note string) { v.userInput(userTurn{text: note, kind: "confirmation"}) }

// Notice gives the model a note the gateway wrote (a drain's "say goodbye
// now"), as soon as it is not speaking.
func (v *Session) Notice(note string) { v.userInput(userTurn{text: note, kind: "notice"}) }

func (v *Session) userInput(u userTurn) {
	v.mu.Lock()
	if v.ending != "" || v.closed {
		v.mu.Unlock()
		return
	}
	v.speech.clear()
	if v.speaking || v.swapping {
		v.deferred = append(v.deferred, u)
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	v.sendUserTurn(u)
}

// End starts the way back to text: the current answer plays out with
// barge-in locked out, then the upstream closes and the host is told.
func (v *Session) End(reason string) { v.shut(reason, true) }

// Block ends voice at once: nothing more reaches the model, and the host is
// told (reason "blocked").
func (v *Session) Block() { v.shut("blocked", false) }

func (v *Session) shut(reason string, drain bool) {
	v.mu.Lock()
	if v.ending != "" && (drain || !v.drain) {
		v.mu.Unlock()
		return
	}
	v.ending, v.drain = reason, drain
	now := !drain || len(v.open) == 0
	v.mu.Unlock()
	v.d.Log.Info("voice: ending", "reason", reason, "after_current_answer", drain)
	if now {
		// Between turns (or at once): closing the upstream ends the pump,
		// which lets queued audio out and tells the host.
		v.closeUpstream()
	}
}

// Stop ends the voice side because the connection is going away, and
// returns when nothing of it runs any more. The host is not told.
func (v *Session) Stop() {
	v.mu.Lock()
	v.stopped = true
	v.mu.Unlock()
	v.cancel()
	v.closeUpstream()
	<-v.done
}

func (v *Session) closeUpstream() {
	v.mu.Lock()
	v.closed = true
	up := v.up
	v.mu.Unlock()
	if up != nil {
		_ = up.Close()
	}
}

func (v *Session) upstream() transport.LiveSession {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.up
}
