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
