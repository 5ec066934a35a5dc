// Package fdroom counts the file descriptors a node's connections hold
// against the room its open-file limit leaves them: a connection on the
// public listener holds one from accept to close, and a voice session's
// model connection one more, from before its dial to its close. One count
// for both, so that text and idle sessions (one descriptor each) may use
// the room voice sessions (two) would, and a voice start that finds the
// room full is refused before it dials instead of failing on EMFILE.
//
// The room is also the one count of the public listener's connections:
// TURNSTILE_MAX_CONNECTIONS bounds how many of its descriptors they may
// hold (TakeConn), so the listener keeps no second count of its own.
package fdroom

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/turnstile-gw/turnstile/transport"
)

// Room is the descriptors connections may hold. Its methods are safe for
// concurrent use; a nil *Room has no bound.
type Room struct {
	max  int64 // 0: no bound
	used atomic.Int64

	maxConns int64 // the public connections' bound; 0: none but max
	connMu   sync.Mutex
	conns    int64 // public connections holding a descriptor; under connMu
}

// New is a room of n descriptors; n ≤ 0 bounds nothing (the open-file
// limit is unknown).
func New(n int) *Room { return &Room{max: int64(max(n, 0))} }

// WithConns bounds the descriptors the public listener's connections may
// hold at conns (≤ 0: by the room alone), before r is shared; it returns r.
func (r *Room) WithConns(conns int) *Room {
	r.maxConns = int64(max(conns, 0))
	return r
}

// TakeConn holds one descriptor for a public connection; false when the
// room is full or the connections hold their bound.
func (r *Room) TakeConn() bool {
	if r == nil {
		return true
	}
	r.connMu.Lock()
	defer r.connMu.Unlock()
	if r.maxConns > 0 && r.conns >= r.maxConns {
		return false
	}
	if !r.Take() {
		return false
	}
	r.conns++
	return true
}

// GiveConn frees a descriptor TakeConn held.
func (r *Room) GiveConn() {
	if r == nil {
		return
	}
	r.connMu.Lock()
	r.conns--
	r.connMu.Unlock()
	r.Give()
}

// ConnsFull reports whether the public connections hold their bound (a
// TakeConn now would be refused for it, whatever room is left).
func (r *Room) ConnsFull() bool {
	if r == nil || r.maxConns == 0 {
		return false
	}
	r.connMu.Lock()
	defer r.connMu.Unlock()
	return r.conns >= r.maxConns
}

// Take holds one descriptor; false when the room is full.
func (r *Room) Take() bool {
	if r == nil {
		return true
	}
	if r.max == 0 {
		r.used.Add(1)
		return true
	}
	for {
		n := r.used.Load()
		if n >= r.max {
			return false
		}
		if r.used.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Give frees one descriptor Take held.
func (r *Room) Give() {
	if r != nil {
		r.used.Add(-1)
	}
}

// Full reports whether a Take now would be refused.
func (r *Room) Full() bool { return r != nil && r.max > 0 && r.used.Load() >= r.max }

// Used and Max are the descriptors held and the room's size (0: no bound).
func (r *Room) Used() int { return int(r.used.Load()) }
func (r *Room) Max() int  { return int(r.max) }

// ErrFull is what a model connection is refused with when the room is
// full: nothing was dialled.
var ErrFull = errors.New("no file descriptor left on this node for another model connection")

// Live makes every session m opens hold a descriptor of r, from before its
// dial to its Close; with the room full Connect returns ErrFull at once.
func Live(r *Room, m transport.LiveModel) transport.LiveModel { return liveModel{r: r, m: m} }

type liveModel struct {
	r *Room
	m transport.LiveModel
}

func (l liveModel) Connect(ctx context.Context, cfg transport.LiveConfig) (transport.LiveSession, error) {
	if !l.r.Take() {
		return nil, ErrFull
	}
	s, err := l.m.Connect(ctx, cfg)
	if err != nil {
		l.r.Give()
		return nil, err
	}
	return &liveSession{LiveSession: s, r: l.r}, nil
}

// liveSession gives its descriptor back at its first Close.
type liveSession struct {
	transport.LiveSession
	r    *Room
	once sync.Once
}

// SetAudioSink and SendsWait pass transport.LiveFast through.
func (s *liveSession) SetAudioSink(sink transport.AudioSink) bool {
	f, ok := s.LiveSession.(transport.LiveFast)
	return ok && f.SetAudioSink(sink)
}

func (s *liveSession) SendsWait() bool {
	f, ok := s.LiveSession.(transport.LiveFast)
	return !ok || f.SendsWait()
}

func (s *liveSession) Close() error {
	err := s.LiveSession.Close()
	s.once.Do(s.r.Give)
	return err
}
