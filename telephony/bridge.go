package telephony

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/audio"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
)

// Conn is a carrier's WebSocket as the bridge uses it (session.Wire's
// method set: session.WebSocketWire gives one).
type Conn interface {
	Read(buf []byte) (binary bool, data []byte, err error)
	Write(binary bool, data []byte) error
	Close(code int, reason string) error
	CloseNow() error
	Ping(ctx context.Context) error
}

// Prompt is added to a call's voice system instruction: how the caller
// answers confirmations, and what a keypad press looks like.
const Prompt = "You are on a phone call: the caller hears you and speaks to you, and has a telephone keypad. " +
	"When a tool needs the caller's approval, ask them to press 1 on the keypad to approve or 2 to decline, " +
	"and wait for the answer. A key the caller presses at other times reaches you as a note such as " +
	"\"the caller pressed 5\"."

// hangupMark names the mark sent after the goodbye: its echo means the
// caller has heard everything, and the call is hung up.
const hangupMark = "turnstile:hangup"

// DefaultHangupWait bounds how long a hang-up waits for the carrier to
// echo the goodbye's mark (the goodbye playing out); a carrier that never
// echoes is hung up on then.
const DefaultHangupWait = 30 * time.Second

// errHungUp ends the session's read when the gateway hung up; errStop when
// the carrier said the call ended.
var (
	errHungUp = websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "hung up"}
	errStop   = websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "call ended"}
)

// BridgeConfig is what one bridge needs.
type BridgeConfig struct {
	Carrier    metrics.Channel // the carrier: the metric label
	Signer     *Signer
	Metrics    *metrics.Metrics
	Log        *slog.Logger
	HangupWait time.Duration // default DefaultHangupWait
}

// Bridge is one phone call as a session connection (session.Wire): it
// reads the carrier's stream and shows the session a browser in voice mode
// — a session.start, microphone audio (μ-law 8 kHz to PCM16 16 kHz), a
// confirm for a keypad answer, a text for other keys — and turns what the
// session sends into the carrier's frames: model audio (PCM16 24 kHz to
// μ-law 8 kHz), clear on barge-in, a mark after each answer, and a hang-up
// once voice ends and the goodbye has played.
//
// Read runs on the session's reader, Write on its writer; the rest is
// guarded by mu.
type Bridge struct {
	cfg    BridgeConfig
	conn   Conn
	stream Stream
	call   Call
	signed string // the start's signature (StartSignature)
	log    *slog.Logger

	// The reader's.
	in      *audio.Inbound
	rbuf    []byte
	greeted bool // the synthetic session.start was read
	stopped bool // the carrier said the call ended

	// The writer's.
	out        *audio.Outbound
	mulaw, buf []byte

	mu       sync.Mutex
	pending  []string // confirmation tokens, oldest first
	voice    bool     // the session reached voice
	hanging  bool     // the goodbye's mark is out: input is dropped
	hungUp   chan struct{}
	dead     chan struct{} // closed by CloseNow
	deadOnce sync.Once
	timer    *time.Timer // hangs up when the mark's echo is late
}

// NewBridge starts a bridge on a carrier connection; Start reads the
// stream's start before the bridge is handed to a session.
func NewBridge(cfg BridgeConfig, conn Conn, stream Stream) *Bridge {
	if cfg.HangupWait <= 0 {
		cfg.HangupWait = DefaultHangupWait
	}
	return &Bridge{cfg: cfg, conn: conn, stream: stream, log: cfg.Log,
		in: audio.NewInbound(), out: audio.NewOutbound(),
		hungUp: make(chan struct{}), dead: make(chan struct{})}
}

// Start reads frames until the stream's start and checks its call
// parameters (signed by this gateway's webhook, for this call). It returns
// the call, or ErrParams / ErrBadFrame / the read's error; ctx bounds it
// (the connection is dropped when it ends).
func (b *Bridge) Start(ctx context.Context) (Call, error) {
	stop := context.AfterFunc(ctx, func() { _ = b.conn.CloseNow() })
	defer stop()
	for {
		binary, data, err := b.conn.Read(b.rbuf)
		if err != nil {
			if ctx.Err() != nil {
				return Call{}, fmt.Errorf("no start: %w", ctx.Err())
			}
			return Call{}, err
		}
		b.rbuf = data[:0]
		if binary {
			return Call{}, fmt.Errorf("%w: a binary frame", ErrBadFrame)
		}
		ev, err := b.stream.Decode(data)
		if err != nil {
			return Call{}, err
		}
		switch ev.Kind {
		case KindStart:
			call, err := b.cfg.Signer.Check(ev.Params, ev.CallSID)
			if err != nil {
				return Call{}, err
			}
			b.call, b.signed = call, ev.Params[ParamSignature]
			b.log = b.log.With("call", call.ID)
			return call, nil
		case KindOther:
		default:
			return Call{}, fmt.Errorf("%w: media before start", ErrBadFrame)
		}
	}
}

// StartSignature is the signature of the start Start accepted: one per
// webhook answer, so the key by which a replay of that start — the same
// frame sent on another stream — is refused (ReplayWindow).
func (b *Bridge) StartSignature() string { return b.signed }

// sessionStart is what the session reads first: a new session in voice.
var sessionStart = []byte(`{"type":"session.start","mode":"voice"}`)

// Read gives the session its next message.
func (b *Bridge) Read(buf []byte) (bool, []byte, error) {
	if !b.greeted {
		b.greeted = true
		return false, append(buf[:0], sessionStart...), nil
	}
	for {
		binary, data, err := b.conn.Read(b.rbuf)
		if err != nil {
			if b.stopped {
				return false, nil, errStop // and the carrier closed the stream, as it does after stop
			}
			b.ended(err)
			return false, nil, err
		}
		b.rbuf = data[:0]
		if b.stopped {
			continue // the call is over: the carrier closes the stream next
		}
		if binary {
			return false, nil, b.badFrame(fmt.Errorf("%w: a binary frame", ErrBadFrame))
		}
		ev, err := b.stream.Decode(data)
		if err != nil {
			return false, nil, b.badFrame(err)
		}
		switch ev.Kind {
		case KindMedia:
			if voice, hanging := b.state(); !voice || hanging {
				// Before voice is up (the model is being connected; the
				// carrier streams from the first moment) and while the
				// goodbye plays, the caller's audio reaches no model.
				continue
			}
			return true, b.in.Convert(buf[:0], ev.Audio), nil
		case KindDTMF:
			if msg := b.digit(ev.Digit); msg != nil {
				return false, append(buf[:0], msg...), nil
			}
		case KindMark:
			if ev.Mark == hangupMark {
				b.event(metrics.TelephonyHangup)
				b.log.Info("call hung up after the goodbye played")
				b.markHungUp()
				// A normal closure ends the carrier's <Connect>; with no
				// verb after it, the call ends.
				_ = b.conn.Close(int(websocket.StatusNormalClosure), "")
				return false, nil, errHungUp
			}
		case KindStop:
			b.stopped = true
			b.log.Info("the carrier ended the call")
		case KindStart:
			return false, nil, b.badFrame(fmt.Errorf("%w: a second start", ErrBadFrame))
		}
	}
}

// ended notes a stream that ended without the carrier's stop.
func (b *Bridge) ended(err error) {
	select {
	case <-b.hungUp:
		return
	case <-b.dead:
		return // the gateway closed it
	default:
	}
	if !b.stopped {
		b.event(metrics.TelephonyDropped)
		b.log.Warn("call stream dropped without stop", "err", err)
	}
}

func (b *Bridge) badFrame(err error) error {
	b.event(metrics.TelephonyStreamBadFrame)
	b.log.Warn("call stream sent a frame that is not the carrier's protocol; ending the call", "err", err)
	_ = b.conn.Close(int(websocket.StatusPolicyViolation), "bad frame")
	return err
}

// digit turns a keypad press into the session's input: the answer to the
// oldest pending confirmation (1 approves, anything else declines), or a
// note to the model. nil: nothing (the call is hanging up).
func (b *Bridge) digit(d string) []byte {
	b.mu.Lock()
	if b.hanging || !b.voice {
		b.mu.Unlock()
		b.log.Info("keypad digit ignored: the call is not in a conversation", "voice", b.voice)
		return nil
	}
	var token string
	if len(b.pending) > 0 {
		token, b.pending = b.pending[0], b.pending[1:]
	}
	b.mu.Unlock()
	if token != "" {
		b.event(metrics.TelephonyDTMFConfirmation)
		b.log.Info("keypad answered a confirmation", "approve", d == "1")
		msg, _ := json.Marshal(map[string]any{"type": protocol.TypeConfirm, "token": token, "approve": d == "1"})
		return msg
	}
	b.event(metrics.TelephonyDTMFText)
	msg, _ := json.Marshal(map[string]any{"type": protocol.TypeText, "text": "the caller pressed " + d})
	return msg
}

// Write takes one message from the session.
func (b *Bridge) Write(binary bool, data []byte) error {
	if binary {
		b.mulaw = b.out.Convert(b.mulaw[:0], data)
		if len(b.mulaw) == 0 {
			return nil
		}
		b.buf = b.stream.AppendMedia(b.buf[:0], b.mulaw)
		return b.conn.Write(false, b.buf)
	}
	var ev struct {
		Type, Token, Code string
		Mode              protocol.Mode
		Turn              int
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil // not ours to judge: the session encoded it
	}
	switch ev.Type {
	case protocol.TypeAudioInterrupted:
		// Barge-in: the carrier drops what it has buffered, and the next
		// answer starts from a clean filter.
		b.out.Reset()
		b.event(metrics.TelephonyClear)
		return b.send(b.stream.AppendClear(b.buf[:0]))
	case protocol.TypeTurnDone:
		return b.send(b.stream.AppendMark(b.buf[:0], "turn:"+strconv.Itoa(ev.Turn)))
	case protocol.TypeConfirmReq:
		b.mu.Lock()
		b.pending = append(b.pending, ev.Token)
		b.mu.Unlock()
	case protocol.TypeConfirmDone:
		b.mu.Lock()
		for i, t := range b.pending {
			if t == ev.Token {
				b.pending = append(b.pending[:i], b.pending[i+1:]...)
				break
			}
		}
		b.mu.Unlock()
	case protocol.TypeMode:
		if ev.Mode == protocol.ModeVoice {
			b.mu.Lock()
			b.voice = true
			b.mu.Unlock()
			return nil
		}
		// Voice is over (end_voice_session, a block): a call has no text
		// mode, so it ends once the goodbye has played.
		return b.hangUp("voice ended")
	case protocol.TypeError:
		b.mu.Lock()
		voice := b.voice
		b.mu.Unlock()
		if !voice && (ev.Code == protocol.CodeUpstreamUnavailable || ev.Code == protocol.CodeUnsupported) {
			// Voice could not start: the caller would hear nothing.
			return b.hangUp("voice unavailable")
		}
	}
	return nil
}

func (b *Bridge) send(frame []byte) error {
	b.buf = frame
	return b.conn.Write(false, frame)
}

// hangUp sends the goodbye's mark (once); the call ends at its echo, or
// after HangupWait.
func (b *Bridge) hangUp(why string) error {
	b.mu.Lock()
	if b.hanging {
		b.mu.Unlock()
		return nil
	}
	b.hanging = true
	b.timer = clock.Wall.FuncTimer(b.cfg.HangupWait, func() {
		b.log.Warn("the carrier did not echo the goodbye's mark; hanging up", "wait", b.cfg.HangupWait)
		_ = b.CloseNow()
	})
	b.mu.Unlock()
	b.log.Info("hanging up once the goodbye has played", "why", why)
	return b.send(b.stream.AppendMark(b.buf[:0], hangupMark))
}

// state is whether the session is in voice, and whether the call is
// hanging up.
func (b *Bridge) state() (voice, hanging bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.voice, b.hanging
}

func (b *Bridge) markHungUp() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.hungUp:
	default:
		close(b.hungUp)
	}
	if b.timer != nil {
		b.timer.Stop()
	}
}

// Close ends the call for the session (a drain, a refused session): the
// goodbye's mark goes out and the stream closes at its echo, so that what
// the model said is heard, bounded by the caller of Close dropping the
// connection (CloseNow).
func (b *Bridge) Close(code int, reason string) error {
	if err := b.hangUp("session closed: " + reason); err == nil {
		select {
		case <-b.hungUp:
		case <-b.dead:
		}
	}
	b.markHungUp()
	// The carrier goes on to the answer's next verb (none: the call ends).
	return b.conn.Close(int(websocket.StatusNormalClosure), "")
}

// CloseNow drops the call at once.
func (b *Bridge) CloseNow() error {
	b.deadOnce.Do(func() { close(b.dead) })
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	return b.conn.CloseNow()
}

// Ping pings the carrier.
func (b *Bridge) Ping(ctx context.Context) error { return b.conn.Ping(ctx) }

func (b *Bridge) event(ev metrics.TelephonyEvent) {
	b.cfg.Metrics.Telephony(b.cfg.Carrier, ev)
}
