// Package texttest holds what the tests of the text model adapters
// (transport/geminitext, transport/openaitext) share: draining a stream
// while checking the transport.TextModel contract, and the contract's
// behaviours on cancellation that every adapter must show against its own
// fake server.
package texttest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
)

// Hello is the smallest request every API accepts.
var Hello = transport.TextRequest{History: []transport.Entry{{Role: transport.RoleUser, Text: "hello"}}}

// Collect drains a stream. It fails the test if anything follows an error,
// which the TextModel contract forbids.
func Collect(t testing.TB, ctx context.Context, m transport.TextModel, req transport.TextRequest) ([]transport.Chunk, error) {
	t.Helper()
	var chunks []transport.Chunk
	var streamErr error
	for c, err := range m.Stream(ctx, req) {
		if streamErr != nil {
			t.Fatalf("stream yielded (%+v, %v) after its error %v", c, err, streamErr)
		}
		if err != nil {
			streamErr = err
			continue
		}
		chunks = append(chunks, c)
	}
	return chunks, streamErr
}

// CancelDuringHangEndsPromptly checks that cancelling a stream while the
// provider hangs ends it at once with context.Canceled, after the chunk
// sent before the hang, and that the server sees the request end. m's
// server must answer one chunk "Still thinking" and then hang; inFlight
// counts its requests in flight.
func CancelDuringHangEndsPromptly(t *testing.T, m transport.TextModel, inFlight func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(Context(t))
	defer cancel()

	var got []string
	var err error
	var cancelledAt time.Time
	for c, e := range m.Stream(ctx, Hello) {
		if e != nil {
			err = e
			break
		}
		got = append(got, c.Text)
		cancelledAt = time.Now()
		cancel()
	}
	if !slices.Equal(got, []string{"Still thinking"}) {
		t.Errorf("chunks = %q, want the one sent before the hang", got)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if d := time.Since(cancelledAt); d > time.Second {
		t.Errorf("the stream took %v to end after cancel, want it prompt", d)
	}
	testwait.For(t, "the fake server to see the request end", func() bool { return inFlight() == 0 })
}

// DeadlineDuringHangIsContextError checks that a stream whose provider
// hangs before its first chunk ends with context.DeadlineExceeded when the
// caller's deadline passes. m's server must hang.
func DeadlineDuringHangIsContextError(t *testing.T, m transport.TextModel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(Context(t), 100*time.Millisecond)
	defer cancel()
	_, err := Collect(t, ctx, m, Hello)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
}

// ConsumerStoppingEarlyReleasesTheRequest checks that a consumer that
// stops after the first chunk releases the request on the server. m's
// server must answer "first", then "second", then hang; inFlight counts
// its requests in flight.
func ConsumerStoppingEarlyReleasesTheRequest(t *testing.T, m transport.TextModel, inFlight func() int) {
	t.Helper()
	for c, err := range m.Stream(Context(t), Hello) {
		if err != nil || c.Text != "first" {
			t.Fatalf("first item = %+v, %v", c, err)
		}
		break
	}
	testwait.For(t, "the abandoned stream to be released", func() bool { return inFlight() == 0 })
}

// RefusedRequestIsNotSent checks that a request whose Admit says no is not
// sent: the stream yields transport.ErrNotAdmitted alone and m's server
// never sees it (requests counts what it saw); Admit is asked once. An
// admitted request is then answered as usual. m's server must answer
// Hello with some text.
func RefusedRequestIsNotSent(t *testing.T, m transport.TextModel, requests func() int) {
	t.Helper()
	asked := 0
	req := Hello
	req.Admit = func() bool { asked++; return false }
	chunks, err := Collect(t, Context(t), m, req)
	if !errors.Is(err, transport.ErrNotAdmitted) || len(chunks) != 0 || asked != 1 {
		t.Fatalf("refused request: chunks %+v, err %v, Admit asked %d times; want ErrNotAdmitted alone, asked once",
			chunks, err, asked)
	}
	if n := requests(); n != 0 {
		t.Fatalf("the server saw %d requests of a refused one, want none", n)
	}
	asked = 0
	req.Admit = func() bool { asked++; return true }
	if chunks, err := Collect(t, Context(t), m, req); err != nil || len(chunks) == 0 || asked != 1 {
		t.Fatalf("admitted request: chunks %+v, err %v, Admit asked %d times; want an answer, asked once", chunks, err, asked)
	}
	if n := requests(); n != 1 {
		t.Fatalf("the server saw %d requests, want the admitted one", n)
	}
}

// Context is the test's context, ended after 10 s at the latest.
func Context(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// HeadersGoBeforeTheVerdict checks that the model made by newModel (aimed
// at base) sends a request's headers while its Admit is still waiting, and
// its body only once Admit said yes: the Admit here waits for the server
// to have the headers, which it would wait for in vain were the request
// held whole. The server then answers 503; the stream's error is not
// looked at.
func HeadersGoBeforeTheVerdict(t *testing.T, newModel func(base string) transport.TextModel) {
	t.Helper()
	ctx := Context(t)
	arrived := make(chan struct{}, 1)
	body := make(chan int, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		b, _ := io.ReadAll(r.Body)
		body <- len(b)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	headersFirst := false
	req := Hello
	req.Admit = func() bool {
		select {
		case <-arrived:
			headersFirst = true
		case <-ctx.Done():
		}
		return true
	}
	_, _ = Collect(t, ctx, newModel(srv.URL), req)
	if !headersFirst {
		t.Fatal("the verdict waited for the request's headers in vain: the request was held whole")
	}
	select {
	case n := <-body:
		if n == 0 {
			t.Fatal("the admitted request's body was empty")
		}
	case <-ctx.Done():
		t.Fatal("the admitted request's body never came")
	}
}
