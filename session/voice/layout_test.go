package voice

import (
	"testing"
	"unsafe"
)

// Every microphone chunk (Mic) and model-audio chunk (onEvent) touches
// the Session on its first two cache lines only: the mutex and the state
// checked under it per chunk on the first, the speech mark, the host and
// the upstream on the second. The Session's size keeps it 64-byte aligned.
func TestSessionKeepsTheVoicePathOnTwoCacheLines(t *testing.T) {
	const line = 64
	var v Session
	for _, f := range []struct {
		name     string
		off, end uintptr
		line     uintptr
	}{
		{"mu", unsafe.Offsetof(v.mu), unsafe.Offsetof(v.mu) + unsafe.Sizeof(v.mu), 0},
		{"closed", unsafe.Offsetof(v.closed), unsafe.Offsetof(v.closed) + 1, 0},
		{"swapping", unsafe.Offsetof(v.swapping), unsafe.Offsetof(v.swapping) + 1, 0},
		{"speaking", unsafe.Offsetof(v.speaking), unsafe.Offsetof(v.speaking) + 1, 0},
		{"ending", unsafe.Offsetof(v.ending), unsafe.Offsetof(v.ending) + unsafe.Sizeof(v.ending), 0},
		{"cur", unsafe.Offsetof(v.cur), unsafe.Offsetof(v.cur) + unsafe.Sizeof(v.cur), 0},
		{"modelAudio", unsafe.Offsetof(v.modelAudio), unsafe.Offsetof(v.modelAudio) + unsafe.Sizeof(v.modelAudio), 0},
		{"speech", unsafe.Offsetof(v.speech), unsafe.Offsetof(v.speech) + unsafe.Sizeof(v.speech), 1},
		{"h", unsafe.Offsetof(v.h), unsafe.Offsetof(v.h) + unsafe.Sizeof(v.h), 1},
		{"up", unsafe.Offsetof(v.up), unsafe.Offsetof(v.up) + unsafe.Sizeof(v.up), 0},
	} {
		if f.off/line != f.line || (f.end-1)/line != f.line {
			t.Errorf("%s at bytes %d–%d, want it within cache line %d", f.name, f.off, f.end-1, f.line)
		}
	}
	// The runtime's size classes from 512 to 1024 bytes that are multiples
	// of 64: an object of one starts on a cache line.
	switch size := unsafe.Sizeof(v); {
	case size > 576 && size <= 640, size > 640 && size <= 704, size > 704 && size <= 768:
	default:
		t.Errorf("a Session is %d bytes: its size class may not keep it 64-byte aligned; check the layout", size)
	}
}
