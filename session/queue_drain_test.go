package session

import (
	"testing"
	"time"
)

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// audioDrained is closed once the last audio frame is written, not when it
// is only taken by the writer; text frames do not hold it.
func TestQueueAudioDrainedWhenTheLastAudioIsWritten(t *testing.T) {
	q := newQueue(1 << 20)
	if !isClosed(q.audioDrained()) {
		t.Fatal("an empty queue is not drained")
	}
	q.pushAudio(make([]byte, 960), time.Time{})
	q.push([]byte(`{"type":"pong"}`))
	q.pushAudio(make([]byte, 960), time.Time{})
	drained := q.audioDrained()
	frames := q.take(nil)
	if isClosed(drained) {
		t.Fatal("drained once taken, before the audio was written")
	}
	for i, f := range frames {
		q.written(f)
		if last := i == len(frames)-1; isClosed(drained) != last {
			t.Fatalf("after writing frame %d of %d: drained = %v", i+1, len(frames), !last)
		}
	}
}

// A barge-in's drop of the queued audio drains it too.
func TestQueueAudioDrainedByDropAudio(t *testing.T) {
	q := newQueue(1 << 20)
	q.pushAudio(make([]byte, 960), time.Time{})
	drained := q.audioDrained()
	q.dropAudio()
	if !isClosed(drained) {
		t.Fatal("dropping the audio did not drain the queue")
	}
}
