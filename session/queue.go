package session

import (
	"sync"
	"time"
)

// queue is a connection's byte-bounded send queue. Producers never block:
// a push that would exceed the bound fails, and the connection is then
// closed as too slow, so memory per connection stays bounded. Audio frames
// are copied into pooled buffers that the writer returns after writing, so
// relaying audio allocates nothing per frame.
type queue struct {
	mu     sync.Mutex
	frames []frame
	bytes  int
	audio  int // bytes of audio queued
	taken  int // bytes of audio taken by the writer and not written yet
	max    int
	notify chan struct{} // capacity 1: "there is something to take"
	// drained is closed once no audio is queued or taken and unwritten;
	// nil while nobody waits for that (see audioDrained).
	drained chan struct{}
}

// closed is a channel that is always closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// frame is one WebSocket message: JSON text, or binary audio in a pooled
// buffer.
type frame struct {
	data   []byte
	binary bool
	buf    *[]byte // the pooled buffer behind an audio frame's data
	// received is when a sampled audio frame came from the model (zero
	// when not sampled), timed to its write.
	received time.Time
}

// audioPool holds audio buffers; a model-audio chunk is typically a few KiB.
var audioPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

func newQueue(maxBytes int) *queue {
	return &queue{max: maxBytes, notify: make(chan struct{}, 1)}
}

// push appends a text frame; it reports false when the bound would be
// exceeded.
func (q *queue) push(data []byte) bool { return q.add(frame{data: data}) }

// pushAudio appends a copy of pcm as a binary frame, under the same bound;
// received is the frame's relay sample time (zero: none).
func (q *queue) pushAudio(pcm []byte, received time.Time) bool {
	bp := audioPool.Get().(*[]byte)
	*bp = append((*bp)[:0], pcm...)
	if !q.add(frame{data: *bp, binary: true, buf: bp, received: received}) {
		audioPool.Put(bp)
		return false
	}
	return true
}

func (q *queue) add(f frame) bool {
	q.mu.Lock()
	if q.bytes+len(f.data) > q.max {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, f)
	q.bytes += len(f.data)
	if f.binary {
		q.audio += len(f.data)
	}
	q.mu.Unlock()
	q.wake()
	return true
}

func (q *queue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued, handing the queue spare (an
// emptied slice from an earlier take) to fill next, so that the two slices
// are reused rather than reallocated. The writer calls done for each frame
// once written.
func (q *queue) take(spare []frame) []frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.frames
	q.taken += q.audio
	q.frames, q.bytes, q.audio = spare[:0], 0, 0
	return out
}

// written is the writer's report that a taken frame is out (or will never
// be written): its pooled buffer is released.
func (q *queue) written(f frame) {
	if f.binary {
		q.mu.Lock()
		q.taken -= len(f.data)
		q.signalDrainedLocked()
		q.mu.Unlock()
	}
	f.done()
}

// done releases a frame's pooled buffer.
func (f frame) done() {
	if f.buf != nil {
		audioPool.Put(f.buf)
	}
}

// drop discards everything queued.
func (q *queue) drop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, f := range q.frames {
		f.done()
	}
	clear(q.frames)
	q.frames, q.bytes, q.audio = q.frames[:0], 0, 0
	q.signalDrainedLocked()
}

// dropAudio discards the queued audio frames and keeps the others, for a
// barge-in: the browser must not hear the rest of an interrupted answer.
func (q *queue) dropAudio() {
	q.mu.Lock()
	defer q.mu.Unlock()
	kept := q.frames[:0]
	q.bytes, q.audio = 0, 0
	for _, f := range q.frames {
		if f.binary {
			f.done()
			continue
		}
		kept = append(kept, f)
		q.bytes += len(f.data)
	}
	clear(q.frames[len(kept):])
	q.frames = kept
	q.signalDrainedLocked()
}

// free is how many bytes may still be queued.
func (q *queue) free() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.max - q.bytes
}

// audioBytes is how many bytes of audio have not been written yet.
func (q *queue) audioBytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.audio + q.taken
}

// audioDrained is a channel closed once no audio is left unwritten: at
// once when none is, else when the writer has written (or a drop has
// discarded) the last of it. It is how a drain waits for the goodbye's
// audio without polling.
func (q *queue) audioDrained() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.audio+q.taken == 0 {
		return closed
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	return q.drained
}

// signalDrainedLocked closes drained if the audio is out; q.mu is held.
func (q *queue) signalDrainedLocked() {
	if q.drained != nil && q.audio+q.taken == 0 {
		close(q.drained)
		q.drained = nil
	}
}
