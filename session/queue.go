package session

import "sync"

// queue is a connection's byte-bounded send queue. Producers never block:
// a push that would exceed the bound fails, and the connection is then
// closed as too slow, so memory per connection stays bounded.
type queue struct {
	mu     sync.Mutex
	frames []frame
	bytes  int
	max    int
	notify chan struct{} // capacity 1: "there is something to take"
}

// frame is one WebSocket message: JSON text, or binary audio.
type frame struct {
	data   []byte
	binary bool
}

func newQueue(maxBytes int) *queue {
	return &queue{max: maxBytes, notify: make(chan struct{}, 1)}
}

// push appends a text frame; it reports false when the bound would be
// exceeded.
func (q *queue) push(data []byte) bool { return q.add(frame{data: data}) }

// pushAudio appends a binary audio frame, under the same bound.
func (q *queue) pushAudio(data []byte) bool { return q.add(frame{data: data, binary: true}) }

func (q *queue) add(f frame) bool {
	q.mu.Lock()
	if q.bytes+len(f.data) > q.max {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, f)
	q.bytes += len(f.data)
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

// take removes and returns everything queued.
func (q *queue) take() []frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.frames
	q.frames, q.bytes = nil, 0
	return out
}

// drop discards everything queued.
func (q *queue) drop() {
	q.mu.Lock()
	q.frames, q.bytes = nil, 0
	q.mu.Unlock()
}

// dropAudio discards the queued audio frames and keeps the others, for a
// barge-in: the browser must not hear the rest of an interrupted answer.
func (q *queue) dropAudio() {
	q.mu.Lock()
	defer q.mu.Unlock()
	kept := q.frames[:0]
	q.bytes = 0
	for _, f := range q.frames {
		if !f.binary {
			kept = append(kept, f)
			q.bytes += len(f.data)
		}
	}
	clear(q.frames[len(kept):])
	q.frames = kept
}

// audioBytes is how many bytes of audio are still queued.
func (q *queue) audioBytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, f := range q.frames {
		if f.binary {
			n += len(f.data)
		}
	}
	return n
}
