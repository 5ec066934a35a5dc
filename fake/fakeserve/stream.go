package fakeserve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/turnstile-gw/turnstile/internal/stages"
)

// SSE is an open server-sent event stream: its headers are sent, and each
// event is flushed to the client as it is written.
type SSE struct {
	w  io.Writer
	rc *http.ResponseController
}

// OpenSSE sends a 200 with contentType (text/event-stream and the
// provider's parameters) and no-cache, and flushes the headers at once, so
// a client sees the stream open before its first chunk.
func OpenSSE(w http.ResponseWriter, contentType string) (*SSE, error) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, fmt.Errorf("flush headers: %w", err)
	}
	return &SSE{w: w, rc: rc}, nil
}

// Data writes data as one "data: ..." event.
func (s *SSE) Data(data []byte) error {
	line := make([]byte, 0, len(data)+8)
	return WriteEvent(s.w, s.rc, append(append(line, "data: "...), data...))
}

// Line writes line as one event as it is, without the "data: " prefix.
func (s *SSE) Line(line []byte) error {
	return WriteEvent(s.w, s.rc, line)
}

// Pace is when a scripted chunk may go: Delay after the one before it, and
// not before Gate (when not nil) is closed.
type Pace struct {
	Delay time.Duration
	Gate  <-chan struct{}
}

// SendChunks is the REST streaming loop both fakes share: each chunk in
// order waits out its pace (or the end of ctx), is built into its wire
// form, and goes as one "data:" event. What a provider sends after the
// chunks (an error line, usage, a terminator) is the caller's.
func SendChunks[C any](ctx context.Context, sse *SSE, chunks []C, pace func(C) Pace, build func(C) ([]byte, error)) error {
	for i, c := range chunks {
		p := pace(c)
		if err := Wait(ctx, p.Delay); err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		if p.Gate != nil {
			select {
			case <-p.Gate:
			case <-ctx.Done():
				return fmt.Errorf("chunk %d: %w", i, ctx.Err())
			}
		}
		data, err := build(c)
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		if err := sse.Data(data); err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		stages.Mark(stages.FakeFirst)
	}
	return nil
}

// TotalDelay is the sum of the chunks' delays: what a unary reply, sent
// whole, waits before it answers.
func TotalDelay[C any](chunks []C, pace func(C) Pace) time.Duration {
	var d time.Duration
	for _, c := range chunks {
		d += pace(c).Delay
	}
	return d
}

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
