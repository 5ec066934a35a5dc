package session

import (
	"math/bits"
	"sync"
	"time"
)

// queue is a connection's byte-bounded send queue. Producers never block:
// a push that would exceed the bound fails, and the connection is then
// closed as too slow, so memory per connection stays bounded. Audio frames
// are copied into pooled buffers that the writer returns after writing, so
// relaying audio allocates nothing per frame.
//
// The writer runs only while there is something to write: a push to a
// queue with no writer running starts one (write), which takes until the
// queue is empty and ends, also while audio streams. Between two frames of
// model audio (20 ms and more apart) a connection holds no writer
// goroutine, nor its stack; starting one per frame costs about what waking
// a parked one did (docs/benchmarks.md, "Active voice sessions' memory").
// An idle connection has no writer goroutine. A text turn's goroutine, or
// the voice pump with model audio, may instead claim the writer's place
// for one frame when nothing is queued and none runs, and write it itself
// (claim, release; conn.sendNow, conn.sendAudio): a frame then waits for
// no goroutine's wake-up.
type queue struct {
	mu     sync.Mutex
	frames []frame
	bytes  int
	audio  int // bytes of audio queued
	taken  int // bytes of audio taken by the writer and not written yet
	max    int
	// drained is closed once no audio is queued or taken and unwritten;
	// nil while nobody waits for that (see audioDrained).
	drained chan struct{}

	// The writer's state. write (nil: none, for tests that take by hand)
	// runs on a goroutine of its own while writing is true; closeReq asks
	// it to close the connection even with nothing queued; stopped starts
	// no writer any more.
	write    func()
	writing  bool
	closeReq bool
	stopped  bool
	writers  sync.WaitGroup
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

// audioPools hold the queue's audio buffers by size, 1 KiB to 64 KiB in
// powers of two (a model-audio chunk is one to a few KiB): a queued frame
// pins a buffer of about its own size, not the largest chunk's, so a
// browser a little behind holds little more than its audio. A larger
// chunk gets a buffer of its own.
var audioPools [audioClasses]sync.Pool

const (
	audioMinShift = 10 // the smallest class, 1 KiB
	audioClasses  = 7  // up to 64 KiB
)

// audioClass is the class of buffers that hold n bytes (audioClasses or
// more: none).
func audioClass(n int) int {
	if n <= 1<<audioMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - audioMinShift
}

// getAudio is an empty buffer for n bytes of audio.
func getAudio(n int) *[]byte {
	c := audioClass(n)
	if c >= audioClasses {
		b := make([]byte, 0, n)
		return &b
	}
	if bp, ok := audioPools[c].Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 1<<(c+audioMinShift))
	return &b
}

// putAudio gives a buffer from getAudio back.
func putAudio(bp *[]byte) {
	n := cap(*bp)
	if c := audioClass(n); c < audioClasses && n == 1<<(c+audioMinShift) {
		audioPools[c].Put(bp)
	}
}

func newQueue(maxBytes int) *queue {
	return &queue{max: maxBytes}
}

// push appends a text frame; it reports false when the bound would be
// exceeded.
func (q *queue) push(data []byte) bool { return q.add(frame{data: data}) }

// pushAudio appends a copy of pcm as a binary frame, under the same bound;
// received is the frame's relay sample time (zero: none).
func (q *queue) pushAudio(pcm []byte, received time.Time) bool {
	bp := getAudio(len(pcm))
	*bp = append((*bp)[:0], pcm...)
	if !q.add(frame{data: *bp, binary: true, buf: bp, received: received}) {
		putAudio(bp)
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
	q.startUnlock()
	return true
}

// startUnlock starts a writer unless one runs (it takes what was just
// queued before it ends); q.mu is held and released.
func (q *queue) startUnlock() {
	start := q.startLocked()
	q.mu.Unlock()
	if start {
		go q.write()
	}
}

// startLocked reports whether a writer is to be started (and counts it as
// running); q.mu is held.
func (q *queue) startLocked() bool {
	if q.writing || q.stopped || q.write == nil {
		return false
	}
	q.writing = true
	q.writers.Add(1)
	return true
}

// claim makes the caller the writer, for one frame of size bytes it
// writes itself rather than waking a goroutine for it, when nothing is
// queued, no writer runs and no close is asked for; it reports whether it
// did. A claim is ended by release (or by the writer's end for good).
func (q *queue) claim(size int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames) == 0 && !q.closeReq && size <= q.max && q.startLocked()
}

// release ends a claim: what was queued meanwhile (or a close asked for)
// goes to a writer goroutine, which takes the claim's place; else no
// writer runs.
func (q *queue) release() {
	q.mu.Lock()
	if len(q.frames) > 0 || q.closeReq {
		q.mu.Unlock()
		go q.write()
		return
	}
	q.writing = false
	q.writers.Done()
	q.mu.Unlock()
}

// requestClose asks the writer to close the connection, starting one if
// none runs.
func (q *queue) requestClose() {
	q.mu.Lock()
	q.closeReq = true
	q.startUnlock()
}

// next is the writer's take: everything queued, and whether a close is
// asked for. When there is neither, the writer is done: it is counted as
// ended (it must return) and ok is false.
func (q *queue) next(spare []frame) (frames []frame, closeReq, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.frames) == 0 && !q.closeReq {
		q.writing = false
		q.writers.Done()
		return spare, false, false
	}
	return q.takeLocked(spare), q.closeReq, true
}

// endWriter is the running writer's end for good: no writer starts after
// it.
func (q *queue) endWriter() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	q.writing = false
	q.writers.Done()
}

// stopWriters starts no writer any more and waits for the one running.
func (q *queue) stopWriters() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.writers.Wait()
}

// take removes and returns everything queued, handing the queue spare (an
// emptied slice from an earlier take) to fill next, so that the two slices
// are reused rather than reallocated. The writer calls done for each frame
// once written.
func (q *queue) take(spare []frame) []frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takeLocked(spare)
}

func (q *queue) takeLocked(spare []frame) []frame {
	out := q.frames
	q.taken += q.audio
	if cap(spare) > keptFrames {
		spare = nil // grown by a backlog: not kept for the connection's life
	}
	q.frames, q.bytes, q.audio = spare[:0], 0, 0
	return out
}

// keptFrames is the most frames a slice handed back for reuse may hold. A
// browser that fell behind grows the queue's slices to its backlog (64
// bytes a frame, thousands of frames under the bound); kept, the two
// slices would pin that for the rest of the session.
const keptFrames = 16

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
		putAudio(f.buf)
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
