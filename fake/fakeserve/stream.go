package fakeserve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// WriteEvent writes one server-sent event, line and a blank line, and
// flushes it to the client at once.
func WriteEvent(w io.Writer, rc *http.ResponseController, line []byte) error {
	if _, err := w.Write(append(line, '\n', '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// Wait sleeps for d unless ctx ends first, and then returns ctx's error.
// A zero or negative d only checks ctx.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SplitText cuts text into at most pieces non-empty parts whose
// concatenation is text, so that a streamed answer arrives in a few
// deltas; each cut prefers to fall just after a space a few runes back. It
// always returns at least one part ("" gives one empty part).
func SplitText(text string, pieces int) []string {
	runes := []rune(text)
	if pieces <= 1 || len(runes) <= 1 {
		return []string{text}
	}
	pieces = min(pieces, len(runes))
	var out []string
	start := 0
	for i := 1; i < pieces; i++ {
		cut := len(runes) * i / pieces
		// Prefer to cut just after a space, looking back a few runes.
		for j := cut; j > start+1 && j > cut-12; j-- {
			if runes[j-1] == ' ' {
				cut = j
				break
			}
		}
		if cut <= start {
			continue
		}
		out = append(out, string(runes[start:cut]))
		start = cut
	}
	out = append(out, string(runes[start:]))
	return out
}
