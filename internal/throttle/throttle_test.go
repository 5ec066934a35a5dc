package throttle

import (
	"testing"
	"time"
)

func TestLogLetsOneLineAPeriodThroughWithTheCount(t *testing.T) {
	var l Log
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, ok := l.Note(t0, 1); !ok || n != 1 {
		t.Fatalf("first occurrence: %d, %v; want logged with 1", n, ok)
	}
	for i := 1; i <= 4765; i++ {
		if _, ok := l.Note(t0.Add(time.Duration(i)*time.Millisecond), 1); ok {
			t.Fatalf("occurrence %d within the minute was let through", i)
		}
	}
	if n, ok := l.Note(t0.Add(time.Minute), 1); !ok || n != 4766 {
		t.Fatalf("after a minute: %d, %v; want logged with 4766 (every occurrence since)", n, ok)
	}
	fast := Log{Every: time.Second}
	fast.Note(t0, 640)
	if n, ok := fast.Note(t0.Add(time.Second), 320); !ok || n != 320 {
		t.Fatalf("a one-second log after a second: %d, %v", n, ok)
	}
}
