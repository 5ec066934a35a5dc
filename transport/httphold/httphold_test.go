package httphold_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/httphold"
)

// heldServer records what a request's handler saw: it tells arrived when
// a request's headers are in, then reads the body to its end or error.
type heldServer struct {
	arrived chan struct{}
	got     chan string // the body read, or "error: …"
}

func startHeldServer(t *testing.T) (*heldServer, string, *http.Client) {
	t.Helper()
	s := &heldServer{arrived: make(chan struct{}, 1), got: make(chan string, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- struct{}{}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			s.got <- "error: " + err.Error() + " after " + string(b)
			return
		}
		s.got <- string(b)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return s, srv.URL, &http.Client{Transport: httphold.Transport(tr)}
}

// waitFor is the verdict of a test's admission: it waits for the server
// to have the request's headers (or the test's end), then answers ok.
func (s *heldServer) waitFor(ctx context.Context, ok bool) func() bool {
	return func() bool {
		select {
		case <-s.arrived:
		case <-ctx.Done():
		}
		return ok
	}
}

// body is what the server read of the last request ("none" if it saw
// none by the test's end).
func (s *heldServer) body(ctx context.Context) string {
	select {
	case b := <-s.got:
		return b
	case <-ctx.Done():
		return "none"
	}
}

func post(ctx context.Context, t *testing.T, c *http.Client, url string, h *httphold.Hold) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(httphold.With(ctx, h), http.MethodPost, url,
		strings.NewReader(`{"contents":"when do you ship?"}`))
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(req)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The verdict's round trip overlaps the request: its headers reach the
// server while the verdict is awaited (an admission that waits for them
// would wait forever were they held too), and its body follows the yes.
func TestHeldRequestSendsItsHeadersBeforeTheVerdictAndItsBodyAfter(t *testing.T) {
	ctx := testContext(t)
	s, url, c := startHeldServer(t)
	h := httphold.New(s.waitFor(ctx, true))
	resp, err := post(ctx, t, c, url, h)
	if err != nil {
		t.Fatalf("admitted request: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if got := s.body(ctx); got != `{"contents":"when do you ship?"}` {
		t.Fatalf("the server read %q, want the whole body", got)
	}
	if ctx.Err() != nil {
		t.Fatal("the verdict waited for headers that never came: the request was held whole")
	}
	if !h.Admitted() {
		t.Fatal("an admitted request reports a refusal")
	}
}

// A refused request's body never leaves: the server has the headers and
// not one byte of the conversation; the client's error is ErrNotAdmitted.
func TestRefusedHeldRequestSendsNoByteOfItsBody(t *testing.T) {
	ctx := testContext(t)
	s, url, c := startHeldServer(t)
	h := httphold.New(s.waitFor(ctx, false))
	resp, err := post(ctx, t, c, url, h)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("a refused request got an answer")
	}
	if !errors.Is(err, transport.ErrNotAdmitted) || h.Admitted() {
		t.Fatalf("refused request: error %v, Admitted %v; want ErrNotAdmitted", err, h.Admitted())
	}
	if got := s.body(ctx); !strings.HasPrefix(got, "error: ") || !strings.HasSuffix(got, " after ") {
		t.Fatalf("the server read %q of a refused request's body, want an error and nothing", got)
	}
	// The connection the refused request broke is not reused: the next
	// request goes out whole.
	h2 := httphold.New(s.waitFor(ctx, true))
	resp, err = post(ctx, t, c, url, h2)
	if err != nil {
		t.Fatalf("the request after a refused one: %v", err)
	}
	_ = resp.Body.Close()
	if got := s.body(ctx); got != `{"contents":"when do you ship?"}` {
		t.Fatalf("the server read %q, want the whole body", got)
	}
}

// A request without a body cannot send its headers first: it is asked at
// once, and a refused one does not reach the server at all.
func TestHeldRequestWithoutABodyIsAskedFirst(t *testing.T) {
	ctx := testContext(t)
	s, url, c := startHeldServer(t)
	asked := 0
	h := httphold.New(func() bool { asked++; return false })
	req, err := http.NewRequestWithContext(httphold.With(ctx, h), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, transport.ErrNotAdmitted) || asked != 1 {
		t.Fatalf("refused GET: error %v, asked %d times; want ErrNotAdmitted, asked once", err, asked)
	}
	select {
	case <-s.arrived:
		t.Fatal("the server saw a refused request without a body")
	default:
	}
	// Asked once: the Hold's answer stands.
	if h.Admitted() || asked != 1 {
		t.Fatalf("Admitted after a refusal: asked %d times", asked)
	}
}

// A held body's wait ends with its request's context: a client that went
// away (the turn cancelled, the connection gone) while the verdict is
// awaited does not keep the HTTP transport's writer waiting for it. The
// Read returns the context's error before the verdict is given; the
// verdict, when it comes, ends the wait that asked for it.
func TestHeldBodyStopsWaitingWhenItsRequestsContextEnds(t *testing.T) {
	verdict := make(chan struct{})
	asked := make(chan struct{})
	h := httphold.New(func() bool { close(asked); <-verdict; return true })
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(httphold.With(ctx, h), http.MethodPost, "http://127.0.0.1:1/",
		strings.NewReader(`{"contents":"when do you ship?"}`))
	if err != nil {
		t.Fatal(err)
	}
	held, err := h.Request(req)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := held.Body.Read(make([]byte, 64))
		read <- err
	}()
	<-asked // the Read waits for the verdict
	cancel()
	select {
	case err := <-read:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read after the context ended: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		close(verdict)
		<-read
		t.Fatal("the held body's Read waited for the verdict after its request's context ended")
	}
	close(verdict) // the verdict's own wait ends with it
	if !h.Admitted() {
		t.Fatal("the verdict given after the cancel is not the Hold's answer")
	}
}
