package geminilive_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func TestUpstreamCloseFrameEndsRecvWithItsCodeAndReason(t *testing.T) {
	f := startFake(t)
	s := connect(t, newModel(t, f.addr, geminilive.Options{}), transport.LiveConfig{})
	r := receive(t, s)
	fs := f.session(t)

	must(t, fs.SendOutputTranscript("Let me look"))
	must(t, fs.Close(1011, "Internal error occurred."))

	evs, err := waitEnd(t, r)
	if len(evs) != 1 || evs[0].Kind != transport.LiveOutputTranscript {
		t.Errorf("events before the close = %+v, want the transcript sent before it", evs)
	}
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != 1011 || ce.Reason != "Internal error occurred." {
		t.Fatalf("Recv = %#v, want *transport.CloseError{1011, \"Internal error occurred.\"}", err)
	}
	if _, again := s.Recv(); again != err {
		t.Errorf("Recv again = %v, want the same error %v", again, err)
	}
	err = s.SendAudio([]byte{1, 2})
	if !errors.Is(err, geminilive.ErrEnded) || !errors.As(err, &ce) {
		t.Errorf("SendAudio after the upstream closed = %v, want ErrEnded wrapping the close", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the upstream closed = %v", err)
	}
	if _, err := s.Recv(); !errors.As(err, &ce) {
		t.Errorf("Recv after Close = %v, want the upstream's close kept", err)
	}
}

func TestUpstreamThatVanishesEndsRecvWith1006(t *testing.T) {
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		_ = setupComplete(ctx, c) // then the handler returns: TCP closes, no close frame
	})
	s := connect(t, newModel(t, rs.addr, geminilive.Options{}), transport.LiveConfig{})
	_, err := waitEnd(t, receive(t, s))
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != 1006 {
		t.Fatalf("Recv = %v, want *transport.CloseError 1006", err)
	}
}

func TestMessagesTheSDKRefusesEndTheSession(t *testing.T) {
	for name, msg := range map[string]string{
		"not JSON":           `hello`,
		"an error":           `{"error":{"code":429,"message":"quota"}}`,
		"a malformed goAway": `{"goAway":{"timeLeft":50}}`,
		"bad audio base64":   `{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"!!"}}]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
				if setupComplete(ctx, c) != nil {
					return
				}
				_ = c.Write(ctx, websocket.MessageBinary, []byte(`{"serverContent":{"turnComplete":true}}`))
				_ = c.Write(ctx, websocket.MessageText, []byte(msg))
				<-ctx.Done()
			})
			s := connect(t, newModel(t, rs.addr, geminilive.Options{}), transport.LiveConfig{})
			evs, err := waitEnd(t, receive(t, s))
			if len(evs) != 1 || evs[0].Kind != transport.LiveTurnComplete {
				t.Errorf("events = %+v, want the turnComplete before the bad message", evs)
			}
			var ce *transport.CloseError
			if err == nil || errors.As(err, &ce) || errors.Is(err, transport.ErrSessionClosed) {
				t.Fatalf("Recv = %v, want an error about the message", err)
			}
			if err := s.SendAudioEnd(); !errors.Is(err, geminilive.ErrEnded) {
				t.Errorf("send after the bad message = %v, want ErrEnded", err)
			}
		})
	}
}

func TestWriteTimeoutEndsTheConnection(t *testing.T) {
	before := goleak.IgnoreCurrent()
	// The upstream completes the setup and then never reads again: socket
	// buffers fill and a write blocks until its deadline.
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		if setupComplete(ctx, c) == nil {
			<-ctx.Done()
		}
	})
	m := newModel(t, rs.addr, geminilive.Options{WriteTimeout: 200 * time.Millisecond})
	s := connect(t, m, transport.LiveConfig{})
	r := receive(t, s)

	chunk := make([]byte, 64<<10)
	var err error
	for range 10000 {
		if err = s.SendAudio(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, geminilive.ErrEnded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("SendAudio to a stalled upstream = %v, want ErrEnded saying the write timed out", err)
	}
	_, recvErr := waitEnd(t, r)
	if recvErr == nil || !strings.Contains(recvErr.Error(), "timed out") {
		t.Errorf("Recv after the timeout = %v, want the write timeout", recvErr)
	}
	if err := s.SendAudioEnd(); !errors.Is(err, geminilive.ErrEnded) {
		t.Errorf("send after the timeout = %v, want ErrEnded", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	rs.stop()
	noLeak(t, before)
}

func TestCloseDuringTrafficStopsEverything(t *testing.T) {
	before := goleak.IgnoreCurrent()
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := m.Connect(ctx, transport.LiveConfig{})
	if err != nil {
		t.Fatal(err)
	}
	fs := f.session(t)

	// The fake speaks without pause and drains the client; the client
	// streams audio from several goroutines and stops taking events after a
	// few, so its receiver waits with an event in hand.
	var wg sync.WaitGroup
	wg.Go(func() {
		pcm := make([]byte, 960)
		for fs.SendAudio(pcm) == nil {
		}
	})
	wg.Go(func() {
		for range fs.Events() {
		}
	})
	sendErrs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			chunk := make([]byte, 320)
			for {
				if err := s.SendAudio(chunk); err != nil {
					sendErrs <- err
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	r := receive(t, s)
	for range 20 {
		nextEvent(t, r)
	}

	// Two goroutines close at once while everything is running.
	closeErrs := make(chan error, 2)
	for range 2 {
		go func() { closeErrs <- s.Close() }()
	}
	for range 2 {
		select {
		case err := <-closeErrs:
			if err != nil {
				t.Errorf("Close = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close hung during traffic")
		}
	}
	for range 3 {
		if err := <-sendErrs; !errors.Is(err, transport.ErrSessionClosed) {
			t.Errorf("send after Close = %v, want ErrSessionClosed", err)
		}
	}
	if _, err := waitEnd(t, r); !errors.Is(err, transport.ErrSessionClosed) {
		t.Errorf("Recv after Close = %v, want ErrSessionClosed", err)
	}
	if _, err := s.Recv(); !errors.Is(err, transport.ErrSessionClosed) {
		t.Errorf("Recv again = %v, want ErrSessionClosed", err)
	}
	wg.Wait() // the fake noticed the hang-up: its emitter and reader ended
	must(t, f.srv.Close())
	noLeak(t, before)
}

func TestResumeWithTheHandleFromAResumptionEvent(t *testing.T) {
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{})
	first := connect(t, m, transport.LiveConfig{History: []transport.Entry{{Role: transport.RoleUser, Text: "hi"}}})
	r := receive(t, first)
	fs1 := f.session(t)
	if ev := clientEvent(t, fs1); ev.Kind != fakegemini.EventClientContent {
		t.Fatalf("first session got %s, want its history seed", ev.Kind)
	}
	fs1.SetState("order 42 discussed")
	if _, err := fs1.SendResumptionUpdate(true); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, r)
	if ev.Kind != transport.LiveResumption || !ev.Resumable || ev.Handle == "" {
		t.Fatalf("event = %+v, want a resumable handle", ev)
	}
	must(t, first.Close())

	second := connect(t, m, transport.LiveConfig{
		ResumeHandle: ev.Handle,
		History:      []transport.Entry{{Role: transport.RoleUser, Text: "hi"}},
	})
	fs2 := f.session(t)
	if fs2.Setup.ResumeHandle() != ev.Handle || !fs2.Resumed {
		t.Fatalf("second setup resumes %q (resumed %v), want %q", fs2.Setup.ResumeHandle(), fs2.Resumed, ev.Handle)
	}
	if got := fs2.State(); got != "order 42 discussed" {
		t.Errorf("resumed state = %v, want the first session's", got)
	}
	// A resumed session keeps its own context: no history is seeded.
	must(t, second.SendText("where were we?"))
	if ev := clientEvent(t, fs2); ev.UserText() != "where were we?" || !ev.TurnComplete {
		t.Errorf("first message after resuming = %+v, want the user's text (no seed)", ev)
	}
}

func TestConnectWithAnUnknownHandleFailsWithTheCloseCode(t *testing.T) {
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{})
	_, err := m.Connect(t.Context(), transport.LiveConfig{ResumeHandle: "expired"})
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != 1007 {
		t.Fatalf("Connect = %v, want a *transport.CloseError 1007", err)
	}
}
