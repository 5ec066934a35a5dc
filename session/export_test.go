package session

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// What the core tests (package session_test) reach of a session without
// a connection: the session over a fake outbound, Outbox.

// Outbox is a fake browser connection as a session reaches it: the events
// it is sent, encoded as the browser reads them, go to Events; a close
// decided by the session is recorded, and ends the session as a
// connection's end does.
type Outbox struct {
	Events chan []byte
	logger *slog.Logger

	onClose  func() // ends the session (TestSession.End)
	once     sync.Once
	mu       sync.Mutex
	d        protocol.Disconnect
	decided  chan struct{}
	done     chan struct{} // the connection has ended
	refusals atomic.Int64
}

// NewOutbox is an outbox holding up to n events the test has not read;
// one more closes it as too slow, as the send queue does.
func NewOutbox(n int, log *slog.Logger) *Outbox {
	return &Outbox{Events: make(chan []byte, n), logger: log, decided: make(chan struct{}), done: make(chan struct{})}
}

var _ outbound = (*Outbox)(nil)

func (o *Outbox) send(ev protocol.Event) {
	b, err := protocol.Encode(ev)
	if err != nil {
		panic(err)
	}
	select {
	case o.Events <- b:
	default:
		o.closeWith(protocol.DisconnectTooSlow)
	}
}

func (o *Outbox) sendNow(ev protocol.Event)                   { o.send(ev) }
func (o *Outbox) reply(build func(budget int) protocol.Event) { o.send(build(cap(o.Events) << 10)) }
func (o *Outbox) sendAudio([]byte, time.Time) bool            { return true }
func (o *Outbox) audioWontWait() bool                         { return true }
func (o *Outbox) affinity() uint64                            { return 0 }
func (o *Outbox) dropAudio()                                  {}
func (o *Outbox) audioDrained() <-chan struct{}               { return o.done }
func (o *Outbox) free() int                                   { return cap(o.Events) << 10 }
func (o *Outbox) abort()                                      { o.closeWith(protocol.Disconnect{}) }
func (o *Outbox) ended() <-chan struct{}                      { return o.done }
func (o *Outbox) alive(time.Time)                             {}
func (o *Outbox) voiceOff()                                   {}
func (o *Outbox) refused(limit, time.Time)                    { o.refusals.Add(1) }
func (o *Outbox) log() *slog.Logger                           { return o.logger }
func (o *Outbox) named(string)                                {}

func (o *Outbox) closing() bool {
	select {
	case <-o.decided:
		return true
	default:
		return false
	}
}

func (o *Outbox) closeWith(d protocol.Disconnect) bool {
	won := false
	o.once.Do(func() {
		o.mu.Lock()
		o.d = d
		o.mu.Unlock()
		close(o.decided)
		won = true
	})
	if won && o.onClose != nil {
		go o.onClose() // as the connection's writer ends it, off the caller
	}
	return won
}

// Closed is the close the session decided; ok is false while none is.
func (o *Outbox) Closed() (d protocol.Disconnect, ok bool) {
	if !o.closing() {
		return d, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.d, true
}

// Ended is closed when the session's connection has ended (End).
func (o *Outbox) Ended() <-chan struct{} { return o.done }

// TestSession is a session over an Outbox, without a connection.
type TestSession struct {
	s      *session
	out    *Outbox
	cancel context.CancelFunc
	once   sync.Once
}

// OpenTestSession makes a session for id over out, as a connection does
// when it reads session.start, and hands it start.
func (m *Manager) OpenTestSession(out *Outbox, id Identity, start protocol.ClientMessage) *TestSession {
	ctx, cancel := context.WithCancel(context.Background())
	t := &TestSession{s: newSession(ctx, m, out, &id), out: out, cancel: cancel}
	out.onClose = t.End
	t.s.open(start)
	return t
}

// Input hands the session one of the browser's messages, as the reader
// does.
func (t *TestSession) Input(msg protocol.ClientMessage) { t.s.enqueue(msg) }

// End ends the session as its connection's end does, and waits for its
// store writes and its record on the timeline.
func (t *TestSession) End() {
	t.once.Do(func() {
		t.cancel()
		started := t.s.stop()
		t.s.finish()
		d, _ := t.out.Closed()
		t.s.left(d, started)
		t.s.m.mu.Lock()
		t.s.m.forgetLocked(t.s)
		t.s.m.mu.Unlock()
		close(t.out.done)
	})
}

// Held counts what the node's live sessions hold that an idle one need
// not (see HeldParts).
type Held struct {
	Conversations int // the orchestrator's policy and loop history
	Timelines     int // a timeline recorder
	Signals       int // channels for the connection's end, close or writer's end
	LogCopies     int // loggers with a handler copy of their own (slog's With)
	WriterParts   int // a writer's watchdog or frame slices, or a writer running
	Limiters      int // a message rate limiter (made at the first message)
}

// HeldParts counts what the node's live sessions and connections hold.
func (m *Manager) HeldParts() Held {
	m.mu.Lock()
	defer m.mu.Unlock()
	var h Held
	for _, s := range m.live {
		if s.conv.Load() != nil {
			h.Conversations++
		}
		if s.tl.Load() != nil {
			h.Timelines++
		}
	}
	for c := range m.all {
		for _, l := range []*latch{&c.done, &c.out.closing, &c.wend} {
			if l.p.Load() != nil {
				h.Signals++
			}
		}
		if _, lean := c.log().Handler().(*connHandler); !lean && c.log() != m.Log {
			h.LogCopies++
		}
		if c.rates.msg != nil {
			h.Limiters++
		}
		c.q.mu.Lock()
		if c.q.writing || c.watchdog != nil || c.q.frames != nil || c.spare != nil {
			h.WriterParts++
		}
		c.q.mu.Unlock()
	}
	return h
}

// RunPresence runs the loop that keeps this node's sessions in the live
// index (as Watch does) until ctx ends.
func (m *Manager) RunPresence(ctx context.Context) { m.presence(ctx) }

// RenewLive is the presence loop's periodic renewal, now.
func (m *Manager) RenewLive(ctx context.Context) { m.markLive(ctx, m.liveIDs()) }
