package session

import (
	"testing"
	"unsafe"
)

// What the voice pump reads of the connection for every model-audio chunk
// (the queue for its claim, the context, the watchdog, the wire, the relay
// series) is on the conn's first cache line, which no chunk writes; the
// reader's per-frame state (its rates, the frames it counts for the
// sampling) is past it. The conn's size keeps it 64-byte aligned.
func TestConnKeepsThePumpsFieldsOnOneCacheLine(t *testing.T) {
	const line = 64
	var c conn
	for _, f := range []struct {
		name      string
		off, size uintptr
	}{
		{"wire", unsafe.Offsetof(c.wire), unsafe.Sizeof(c.wire)},
		{"q", unsafe.Offsetof(c.q), unsafe.Sizeof(c.q)},
		{"ctx", unsafe.Offsetof(c.ctx), unsafe.Sizeof(c.ctx)},
		{"watchdog", unsafe.Offsetof(c.watchdog), unsafe.Sizeof(c.watchdog)},
		{"relay", unsafe.Offsetof(c.relay), unsafe.Sizeof(c.relay)},
	} {
		if (f.off+f.size-1)/line != 0 {
			t.Errorf("%s at bytes %d–%d, past the first cache line", f.name, f.off, f.off+f.size-1)
		}
	}
	for name, off := range map[string]uintptr{"micFrames": unsafe.Offsetof(c.micFrames), "rates": unsafe.Offsetof(c.rates),
		"lastSeen": unsafe.Offsetof(c.lastSeen)} {
		if off < line {
			t.Errorf("the reader's %s is at byte %d, on the pump's cache line", name, off)
		}
	}
	// The reader's per-frame fields, on one line of their own.
	mf, pace, mic := unsafe.Offsetof(c.micFrames), unsafe.Offsetof(c.rates)+unsafe.Offsetof(c.rates.micPace),
		unsafe.Offsetof(c.rates)+unsafe.Offsetof(c.rates.mic)
	if mf/line != (mf+7)/line || mf/line != pace/line || pace/line != (mic+7)/line {
		t.Errorf("the reader's micFrames (byte %d), pace (%d) and microphone limiter (%d) are not on one cache line",
			mf, pace, mic)
	}
	switch size := unsafe.Sizeof(c); {
	case size > 576 && size <= 640, size > 640 && size <= 704, size > 704 && size <= 768:
	default:
		t.Errorf("a conn is %d bytes: its size class may not keep it 64-byte aligned; check the layout", size)
	}
}

// A microphone frame reads of its session the voice side and the state
// (for a block): both on one of the session's cache lines.
func TestSessionKeepsTheMicrophonesFieldsOnOneCacheLine(t *testing.T) {
	const line = 64
	var s session
	st, v := unsafe.Offsetof(s.st), unsafe.Offsetof(s.act)+unsafe.Offsetof(s.act.voice)
	if st/line != (st+7)/line || v/line != (v+7)/line || st/line != v/line {
		t.Errorf("the session's st at byte %d and its voice side at byte %d are not on one cache line", st, v)
	}
	switch size := unsafe.Sizeof(s); {
	case size > 384 && size <= 448, size > 448 && size <= 512:
	default:
		t.Errorf("a session is %d bytes: its size class may not keep it 64-byte aligned; check the layout", size)
	}
}
