package session

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

func frames(q []frame) []string {
	out := make([]string, len(q))
	for i, f := range q {
		out[i] = string(f.data)
	}
	return out
}

func TestQueueRefusesPushPastBoundAndKeepsEarlierFrames(t *testing.T) {
	q := newQueue(10)
	for _, f := range []string{"aaaa", "bbbb"} {
		if !q.push([]byte(f)) {
			t.Fatalf("push %q refused under the bound", f)
		}
	}
	if q.push([]byte("cccc")) {
		t.Fatal("push to 12 bytes of a 10-byte queue accepted")
	}
	if !q.push([]byte("dd")) {
		t.Fatal("push to exactly the bound refused")
	}
	if got, want := frames(q.take(nil)), []string{"aaaa", "bbbb", "dd"}; !slices.Equal(got, want) {
		t.Errorf("take = %q, want %q (the refused frame left out, the others intact)", got, want)
	}
}

func TestQueueRefusesFrameLargerThanBoundWhenEmpty(t *testing.T) {
	q := newQueue(8)
	if q.push(make([]byte, 9)) {
		t.Fatal("a 9-byte frame was accepted by an empty 8-byte queue")
	}
	if got := q.take(nil); len(got) != 0 {
		t.Errorf("take = %q, want nothing", frames(got))
	}
}

func TestQueueTakeEmptiesAndFreesTheBound(t *testing.T) {
	q := newQueue(6)
	q.push([]byte("abc"))
	q.push([]byte("def"))
	if got := frames(q.take(nil)); !slices.Equal(got, []string{"abc", "def"}) {
		t.Fatalf("take = %q", got)
	}
	if got := q.take(nil); len(got) != 0 {
		t.Errorf("second take = %q, want nothing", frames(got))
	}
	if !q.push([]byte("ghijkl")) {
		t.Error("a full-bound push after take was refused: take did not free the bytes")
	}
}

func TestQueueDropDiscardsAndFreesTheBound(t *testing.T) {
	q := newQueue(4)
	q.push([]byte("abcd"))
	q.drop()
	if got := q.take(nil); len(got) != 0 {
		t.Errorf("take after drop = %q, want nothing", frames(got))
	}
	if !q.push([]byte("efgh")) {
		t.Error("push after drop refused")
	}
}

// A push starts a writer only when none runs: two pushes before the
// writer takes start one, and a push after it found the queue empty (and
// ended) starts the next.
func TestQueueStartsOneWriterForManyFramesAndAnotherOnceItEnded(t *testing.T) {
	q := newQueue(100)
	var launches atomic.Int32
	var mu sync.Mutex
	var got [][]string
	gate := make(chan struct{})
	q.write = func() {
		launches.Add(1)
		<-gate
		for {
			f, _, ok := q.next(nil)
			if !ok {
				return
			}
			mu.Lock()
			got = append(got, frames(f))
			mu.Unlock()
		}
	}
	writing := func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.writing }
	q.push([]byte("a"))
	q.push([]byte("b"))
	close(gate)
	testwait.For(t, "the writer to end", func() bool { return !writing() })
	q.push([]byte("c"))
	testwait.For(t, "the second writer to end", func() bool { return !writing() })
	q.stopWriters()
	if n := launches.Load(); n != 2 {
		t.Errorf("%d writers started, want 2 (one for a and b, one for c)", n)
	}
	if want := [][]string{{"a", "b"}, {"c"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("writers took %q, want %q", got, want)
	}
}

// Several producers push while one writer takes: nothing is lost and each
// producer's frames arrive in the order it pushed them.
func TestQueueConcurrentProducersLoseNothingAndKeepOrder(t *testing.T) {
	const producers, perProducer = 6, 500
	q := newQueue(1 << 20)

	var mu sync.Mutex
	var all []string
	q.write = collect(q, &mu, &all)

	var wg sync.WaitGroup
	refused := make(chan string, producers*perProducer)
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				f := fmt.Sprintf("%d:%d", p, i)
				if !q.push([]byte(f)) {
					refused <- f
				}
			}
		})
	}
	wg.Wait()
	close(refused)
	for f := range refused {
		t.Errorf("push %s refused under the bound", f)
	}

	q.stopWriters()
	if len(all) != producers*perProducer {
		t.Fatalf("taker got %d frames, want %d", len(all), producers*perProducer)
	}
	next := make([]int, producers)
	for _, f := range all {
		var p, i int
		if _, err := fmt.Sscanf(f, "%d:%d", &p, &i); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if i != next[p] {
			t.Fatalf("producer %d: got frame %d, want %d (lost or reordered)", p, i, next[p])
		}
		next[p]++
	}
}

func TestQueueDropAudioKeepsEventsAndFreesTheirBytes(t *testing.T) {
	q := newQueue(100)
	q.push([]byte("ev1"))
	q.pushAudio(make([]byte, 40), time.Time{})
	q.push([]byte("ev2"))
	q.pushAudio(make([]byte, 40), time.Time{})
	if q.pushAudio(make([]byte, 40), time.Time{}) {
		t.Fatal("push past the bound accepted")
	}
	if n := q.audioBytes(); n != 80 {
		t.Fatalf("audio bytes = %d, want 80", n)
	}
	q.dropAudio()
	if !q.pushAudio(make([]byte, 90), time.Time{}) {
		t.Fatal("dropping audio did not free its bytes")
	}
	got := q.take(nil)
	if len(got) != 3 || string(got[0].data) != "ev1" || string(got[1].data) != "ev2" || !got[2].binary {
		t.Fatalf("after dropAudio: %v", frames(got))
	}
}

// A queued audio frame pins a buffer of about its own size: the smallest
// power of two from 1 KiB that holds it, up to 64 KiB; a larger chunk gets
// one of exactly its size. Buffers come back through the pool of their size.
func TestQueuedAudioTakesABufferOfItsOwnSize(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{1, 1 << 10}, {960, 1 << 10}, {1 << 10, 1 << 10}, {1<<10 + 1, 2 << 10}, {1920, 2 << 10},
		{5000, 8 << 10}, {64 << 10, 64 << 10}, {64<<10 + 1, 64<<10 + 1},
	} {
		q := newQueue(1 << 20)
		if !q.pushAudio(make([]byte, c.n), time.Time{}) {
			t.Fatalf("%d bytes refused", c.n)
		}
		f := q.take(nil)[0]
		if got := cap(*f.buf); got != c.want || len(f.data) != c.n {
			t.Errorf("%d bytes of audio: a buffer of %d holding %d, want %d", c.n, got, len(f.data), c.want)
		}
		q.written(f)
	}
}

// A backlog grows the queue's frame slices; once it is written they are
// not kept for the rest of the connection (a few frames' worth are).
func TestQueueKeepsNoSliceGrownByABacklog(t *testing.T) {
	q := newQueue(1 << 20)
	for range 1000 {
		q.push([]byte("x"))
	}
	backlog := q.take(nil)
	q.push([]byte("y"))
	got := q.take(backlog[:0])
	q.push([]byte("z"))
	if c := cap(q.frames); c > keptFrames {
		t.Errorf("after a backlog of 1000 frames the queue keeps room for %d, want at most %d", c, keptFrames)
	}
	if len(got) != 1 || string(got[0].data) != "y" {
		t.Errorf("took %q, want [y]", frames(got))
	}
	q.take(got[:0])
	q.push([]byte("w"))
	if &q.frames[0] != &got[:1][0] {
		t.Error("a small slice handed back is not reused")
	}
}

// A producer may write a frame itself only when nothing is queued and no
// writer runs; what is pushed while it writes waits, in order, for a
// writer started when it is done, and no second claim is granted
// meanwhile.
func TestQueueClaimWritesAheadOnlyWhenIdleAndLaterFramesFollowInOrder(t *testing.T) {
	q := newQueue(100)
	var mu sync.Mutex
	var got []string
	q.write = collect(q, &mu, &got)
	if !q.claim(3) {
		t.Fatal("claim refused on an idle, empty queue")
	}
	got = append(got, "mine") // the claimer's own write
	q.push([]byte("a"))
	q.push([]byte("b"))
	if q.claim(1) {
		t.Fatal("a second claim granted while the first writes")
	}
	q.release()
	q.stopWriters()
	if want := []string{"mine", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("written %q, want %q", got, want)
	}

	q = newQueue(100)
	q.push([]byte("queued")) // no writer yet: it stays queued
	q.write = func() {}
	if q.claim(1) {
		t.Error("claim granted with a frame queued: it would overtake it")
	}
	q = newQueue(4)
	q.write = func() {}
	if q.claim(5) {
		t.Error("claim granted for a frame larger than the queue's bound")
	}
}

// collect is a writer that takes the queue's frames into *into, under mu,
// until the queue has none.
func collect(q *queue, mu *sync.Mutex, into *[]string) func() {
	return func() {
		for {
			f, _, ok := q.next(nil)
			if !ok {
				return
			}
			mu.Lock()
			*into = append(*into, frames(f)...)
			mu.Unlock()
		}
	}
}
