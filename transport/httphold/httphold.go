// Package httphold sends an HTTP request's headers at once and holds its
// body until a verdict admits it: the text adapters' requests wait so for
// their turn's admission (transport.TextRequest.Admit).
package httphold

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/turnstile-gw/turnstile/transport"
)

// A text turn's model request waits for the session's verdict
// (transport.TextRequest.Admit). Asked before the request is sent, the verdict's
// store round trip and the SDK's own preparation and send add up; held
// in the request's body instead, they overlap: the request is built, its
// connection taken and its headers sent at once, and its body — the
// conversation, everything the model could act on — goes only once the
// verdict says yes. A refused request's body is never sent: the
// request fails on its connection (which is closed), and the endpoint
// sees headers and an incomplete body, no prompt.

// Hold is one request's verdict, asked at most once whoever asks first:
// the HTTP transport about to send the body (Transport), or the adapter
// (after a request that failed, to learn whether the refusal was why).
type Hold struct {
	admit func() bool
	once  sync.Once
	done  chan struct{} // closed once ok is known
	ok    bool
}

// New holds a request's body until admit says yes; nil admit admits.
func New(admit func() bool) *Hold { return &Hold{admit: admit, done: make(chan struct{})} }

// Admitted asks the verdict once and returns it.
func (h *Hold) Admitted() bool {
	h.once.Do(h.ask)
	<-h.done
	return h.ok
}

func (h *Hold) ask() {
	h.ok = h.admit == nil || h.admit()
	close(h.done)
}

// admittedBy is Admitted for the body of a request made with ctx: a wait
// that ends with ctx too (the client went away, the turn was cancelled),
// with ctx's error, rather than hold the HTTP transport's writer until
// the verdict. The verdict is then asked on a goroutine of its own, which
// ends with it.
func (h *Hold) admittedBy(ctx context.Context) (bool, error) {
	if ctx.Done() == nil {
		return h.Admitted(), nil
	}
	h.once.Do(func() { go h.ask() })
	select {
	case <-h.done:
		return h.ok, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

type holdKey struct{}

// With returns ctx carrying h for Transport: a request made with it
// sends its body only once h admits it.
func With(ctx context.Context, h *Hold) context.Context {
	return context.WithValue(ctx, holdKey{}, h)
}

// Transport wraps base (nil: http.DefaultTransport) so that a request
// whose context carries a Hold (With) sends its headers at once and
// its body only once the Hold admits it; a refused one fails with
// transport.ErrNotAdmitted before a byte of its body is written. A request without
// a body of known length is asked first and sent whole. Requests without
// a Hold pass through.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return holdingTransport{base: base}
}

// Holds reports whether c's transport holds bodies (Transport).
func Holds(c *http.Client) bool {
	if c == nil {
		return false
	}
	_, ok := c.Transport.(holdingTransport)
	return ok
}

type holdingTransport struct{ base http.RoundTripper }

func (t holdingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h, _ := r.Context().Value(holdKey{}).(*Hold)
	if h == nil {
		return t.base.RoundTrip(r)
	}
	r, err := h.Request(r)
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, err
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections closes base's idle connections (http.Client's
// CloseIdleConnections looks for it).
func (t holdingTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Request returns r with its body held by h (a shallow copy, reading r's
// body). A request without a body of known length cannot send its headers
// first (net/http would read the body to learn whether it is empty): h is
// asked at once, and a refused request is transport.ErrNotAdmitted, r returned as
// it was.
func (h *Hold) Request(r *http.Request) (*http.Request, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 {
		if !h.Admitted() {
			return r, transport.ErrNotAdmitted
		}
		return r, nil
	}
	r2 := new(http.Request)
	*r2 = *r
	ctx := r.Context()
	r2.Body = &heldBody{h: h, ctx: ctx, body: r.Body}
	if get := r.GetBody; get != nil {
		// net/http rewinds a body through GetBody to send it again on
		// a new connection when a reused one broke under it.
		r2.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil {
				return nil, err
			}
			return &heldBody{h: h, ctx: ctx, body: b}, nil
		}
	}
	return r2, nil
}

// heldBody is a request body that asks its Hold before its first byte,
// waiting no longer than its request's context (ctx). The Hold asks once;
// later reads find its answer.
type heldBody struct {
	h    *Hold
	ctx  context.Context
	body io.ReadCloser
}

// admitted is nil once the Hold admitted the request: else
// transport.ErrNotAdmitted, or the request's context's error when it
// ended first.
func (b *heldBody) admitted() error {
	ok, err := b.h.admittedBy(b.ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return transport.ErrNotAdmitted
	}
	return nil
}

func (b *heldBody) Read(p []byte) (int, error) {
	if err := b.admitted(); err != nil {
		return 0, err
	}
	return b.body.Read(p)
}

func (b *heldBody) Close() error { return b.body.Close() }

// WriteTo writes the body in one go once admitted (net/http copies a
// body with it, so that no copy buffer is taken for it).
func (b *heldBody) WriteTo(w io.Writer) (int64, error) {
	if err := b.admitted(); err != nil {
		return 0, err
	}
	return io.Copy(w, b.body)
}
