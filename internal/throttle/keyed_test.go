package throttle

import (
	"testing"
	"time"
)

func TestKeyedLetsOneLinePerKeyAndIntervalThroughWithACount(t *testing.T) {
	now := time.Unix(0, 0)
	th := Keyed{Every: time.Minute}
	if n, ok := th.Note("a", now, 1); !ok || n != 1 {
		t.Fatalf("first: (%d, %v)", n, ok)
	}
	for range 5 {
		if _, ok := th.Note("a", now, 1); ok {
			t.Fatal("a second line within the minute")
		}
	}
	if n, ok := th.Note("b", now, 1); !ok || n != 1 {
		t.Fatalf("another key: (%d, %v)", n, ok)
	}
	now = now.Add(time.Minute)
	if n, ok := th.Note("a", now, 1); !ok || n != 6 {
		t.Fatalf("after a minute: (%d, %v), want 6 (5 held back and this one)", n, ok)
	}
}
