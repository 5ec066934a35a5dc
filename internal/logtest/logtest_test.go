package logtest

import (
	"fmt"
	"sync"
	"testing"
)

// Writers on many goroutines and a reader at the same time (run with
// -race): every line arrives whole.
func TestBufferTakesConcurrentWritersWhole(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				_, _ = fmt.Fprintf(&b, "writer %d line %d\n", i, j)
				_ = b.Contains("writer")
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		if !b.Contains(fmt.Sprintf("writer %d line 49\n", i)) {
			t.Fatalf("writer %d's last line is missing:\n%s", i, b.String())
		}
	}
}
