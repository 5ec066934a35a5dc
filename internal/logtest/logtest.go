// Package logtest is for tests: a log destination that the code under test
// writes from its goroutines while the test reads it.
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers: an
// slog handler's output, a child process's stderr.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contains reports whether what was written so far contains sub.
func (b *Buffer) Contains(sub string) bool { return strings.Contains(b.String(), sub) }
