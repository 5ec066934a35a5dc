package session

import "sync"

// queue is a connection's byte-bounded send queue. Producers never block:
// a push that would exceed the bound fails, and the connection is then
// closed as too slow, so memory per connection stays bounded.
type queue struct {
	mu     sync.Mutex
	frames [][]byte
	bytes  int
	max    int
	notify chan struct{} // capacity 1: "there is something to take"
}

func newQueue(maxBytes int) *queue {
	return &queue{max: maxBytes, notify: make(chan struct{}, 1)}
}

// push appends a frame; it reports false when the bound would be exceeded.
func (q *queue) push(frame []byte) bool {
	q.mu.Lock()
	if q.bytes+len(frame) > q.max {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, frame)
	q.bytes += len(frame)
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
func (q *queue) take() [][]byte {
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
