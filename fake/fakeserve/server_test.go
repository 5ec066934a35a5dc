package fakeserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The server starts a Serve goroutine and handler goroutines; none may
// outlive Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func refuse(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "closing", http.StatusServiceUnavailable)
}

func TestCloseEndsAHangingRequestAndWaitsForIt(t *testing.T) {
	var returned atomic.Bool
	s := New("fake", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer returned.Store(true)
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // a stream that never ends by itself
	}), refuse, nil)
	root, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(root + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n := s.InFlight(); n != 1 { // the handler has sent the headers and waits
		t.Fatalf("%d requests in flight, want the hanging one", n)
	}

	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !returned.Load() || s.InFlight() != 0 {
		t.Fatalf("after Close: handler returned %v, %d in flight; want it returned and none", returned.Load(), s.InFlight())
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestRequestsAfterCloseAreRefused(t *testing.T) {
	var served atomic.Int32
	s := New("fake", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }), refuse, nil)
	h := s.Handler()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusServiceUnavailable || served.Load() != 1 {
		t.Fatalf("after Close: status %d, routes served %d times; want 503 and only the request before Close", rec.Code, served.Load())
	}
}

func TestStartTwiceOrAfterCloseFailsNamingTheServer(t *testing.T) {
	s := New("fakething", http.NotFoundHandler(), refuse, nil)
	root, err := s.Start("127.0.0.1:0")
	if err != nil || !strings.HasPrefix(root, "http://127.0.0.1:") || strings.HasSuffix(root, "/") {
		t.Fatalf("start = %q, %v; want http://127.0.0.1:PORT", root, err)
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil || !strings.HasPrefix(err.Error(), "fakething: start: already started") {
		t.Errorf("second start: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil || !strings.HasPrefix(err.Error(), "fakething: start: server closed") {
		t.Errorf("start after close: %v", err)
	}
}

func TestRootURLReachesAWildcardListenerThroughLoopback(t *testing.T) {
	cases := map[string]net.Addr{
		"http://127.0.0.1:8080": &net.TCPAddr{IP: net.IPv4zero, Port: 8080},
		"http://127.0.0.1:9":    &net.TCPAddr{IP: net.IPv6unspecified, Port: 9},
		"http://[::1]:7":        &net.TCPAddr{IP: net.IPv6loopback, Port: 7},
		"http://10.0.0.2:80":    &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 80},
	}
	for want, addr := range cases {
		if got := rootURL(addr); got != want {
			t.Errorf("rootURL(%v) = %q, want %q", addr, got, want)
		}
	}
}

func TestWaitEndsEarlyWhenTheContextEnds(t *testing.T) {
	if err := Wait(t.Context(), time.Millisecond); err != nil {
		t.Errorf("a short wait: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("an hour's wait on a cancelled context = %v, want context.Canceled at once", err)
	}
	if err := Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("no wait on a cancelled context = %v, want context.Canceled", err)
	}
}
