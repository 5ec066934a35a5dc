package fdroom_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

func TestARoomHandsOutAtMostItsSizeAtOnce(t *testing.T) {
	r := fdroom.New(10)
	var got atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if r.Take() {
				got.Add(1)
			}
		})
	}
	wg.Wait()
	if got.Load() != 10 || r.Used() != 10 || !r.Full() {
		t.Fatalf("100 takes of a room of 10: %d taken, used %d, full %v", got.Load(), r.Used(), r.Full())
	}
	r.Give()
	if r.Full() || !r.Take() || r.Take() {
		t.Fatal("one given back: want exactly one more take")
	}
	for _, unbounded := range []*fdroom.Room{nil, fdroom.New(0)} {
		for range 3 {
			if !unbounded.Take() {
				t.Fatal("a room of no bound refused a take")
			}
		}
		if unbounded.Full() {
			t.Fatal("a room of no bound is full")
		}
	}
}

// liveModel is the real Live adapter over a genai client whose base URL is
// ws://addr/.
func liveModel(t *testing.T, addr string) transport.LiveModel {
	t.Helper()
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "")
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: "k",
		HTTPOptions: genai.HTTPOptions{BaseURL: "ws://" + addr + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	return geminilive.New(c, "gemini-live-test", geminilive.Options{})
}

func TestAModelConnectionHoldsADescriptorFromDialToClose(t *testing.T) {
	srv := fakegemini.New(fakegemini.NewScript(), nil)
	script := fakegemini.NewLiveScript()
	srv.SetLiveBrain(script)
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	room := fdroom.New(2)
	if !room.Take() { // a browser connection
		t.Fatal("take")
	}
	live := fdroom.Live(room, liveModel(t, strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	up, err := live.Connect(ctx, transport.LiveConfig{})
	if err != nil {
		t.Fatalf("connect with a descriptor free: %v", err)
	}
	if room.Used() != 2 {
		t.Fatalf("used %d with a browser and a model connection, want 2", room.Used())
	}
	if _, err := live.Connect(ctx, transport.LiveConfig{}); !errors.Is(err, fdroom.ErrFull) {
		t.Fatalf("connect with the room full: %v, want ErrFull", err)
	}
	<-script.Sessions() // the first one's
	select {
	case s := <-script.Sessions():
		t.Fatalf("the model saw a connection the full room refused: %s", s.ID)
	default:
	}
	_ = up.Close()
	_ = up.Close()
	if room.Used() != 1 {
		t.Fatalf("used %d after the model connection closed twice, want 1", room.Used())
	}

	// A dial that fails gives its descriptor back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	if _, err := fdroom.Live(room, liveModel(t, dead)).Connect(ctx, transport.LiveConfig{}); err == nil || errors.Is(err, fdroom.ErrFull) {
		t.Fatalf("a dial to nowhere: %v, want it to fail dialling", err)
	}
	if room.Used() != 1 {
		t.Fatalf("used %d after a failed dial, want 1", room.Used())
	}
}

// The room is the one count of both caps: public connections stop at
// their bound (TURNSTILE_MAX_CONNECTIONS) even with descriptors left, and
// at the room's end even below it, when model connections hold the rest.
func TestPublicConnectionsStopAtTheirBoundOrTheRoomsEnd(t *testing.T) {
	r := fdroom.New(4).WithConns(3)
	for i := range 3 {
		if !r.TakeConn() {
			t.Fatalf("connection %d refused below both bounds", i+1)
		}
	}
	if r.TakeConn() || !r.ConnsFull() {
		t.Fatal("a fourth connection was taken past the connections' bound")
	}
	if !r.Take() {
		t.Fatal("a model connection was refused with a descriptor left")
	}
	r.GiveConn()
	if !r.Take() {
		t.Fatal("a second model connection was refused with a descriptor left")
	}
	if r.ConnsFull() || r.TakeConn() {
		t.Fatal("with the room full a connection was still taken")
	}
	r.Give()
	if !r.TakeConn() || r.Used() != 4 {
		t.Fatalf("after the model connection closed: used %d, want 4", r.Used())
	}
	var unbounded *fdroom.Room
	if !unbounded.TakeConn() || unbounded.ConnsFull() {
		t.Error("a nil room bounded a connection")
	}
}
