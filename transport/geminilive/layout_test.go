package geminilive

import (
	"testing"
	"unsafe"
)

// A send reads the connection and whether it is usable from the Session's
// first cache line, and Recv's per-message fields are all past it: a
// microphone chunk's send touches one line of the Session, and the pump's
// writes to its own fields do not take that line from the sender's core.
func TestSessionKeepsTheSendersFieldsApartFromRecvs(t *testing.T) {
	const line = 64
	var s Session
	for name, off := range map[string]uintptr{"conn": unsafe.Offsetof(s.conn), "werr": unsafe.Offsetof(s.werr),
		"dead": unsafe.Offsetof(s.dead)} {
		if off >= line {
			t.Errorf("the senders' %s is at byte %d, past the first cache line", name, off)
		}
	}
	for name, off := range map[string]uintptr{"rbuf": unsafe.Offsetof(s.rbuf), "pcm": unsafe.Offsetof(s.pcm),
		"events": unsafe.Offsetof(s.events), "next": unsafe.Offsetof(s.next)} {
		if off < line {
			t.Errorf("Recv's %s is at byte %d, on the senders' cache line", name, off)
		}
	}
	if size := unsafe.Sizeof(s); size > 2*line {
		t.Errorf("a Session is %d bytes, more than two cache lines", size)
	}
}
