package geminilive_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/fakegemini"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func TestUpstreamCloseFrameEndsEventsWithItsCodeAndReason(t *testing.T) {
	f := startFake(t)
	s := connect(t, newModel(t, f.addr, geminilive.Options{}), transport.LiveConfig{})
	fs := f.session(t)

	must(t, fs.SendOutputTranscript("Let me look"))
	must(t, fs.Close(1011, "Internal error occurred."))

	evs := waitClosed(t, s)
	if len(evs) != 1 || evs[0].Kind != transport.LiveOutputTranscript {
		t.Errorf("events before the close = %+v, want the transcript sent before it", evs)
	}
	var ce *transport.CloseError
	if err := s.Err(); !errors.As(err, &ce) || ce.Code != 1011 || ce.Reason != "Internal error occurred." {
		t.Fatalf("Err = %#v, want *transport.CloseError{1011, \"Internal error occurred.\"}", s.Err())
	}
	err := s.SendAudio([]byte{1, 2})
	if !errors.Is(err, geminilive.ErrEnded) || !errors.As(err, &ce) {
		t.Errorf("SendAudio after the upstream closed = %v, want ErrEnded wrapping the close", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the upstream closed = %v", err)
	}
	if !errors.As(s.Err(), &ce) {
		t.Errorf("Err after Close = %v, want the upstream's close kept", s.Err())
	}
}

func TestCloseDuringTrafficStopsEverything(t *testing.T) {
	before := goleak.IgnoreCurrent()
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{SendQueue: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := m.Connect(ctx, transport.LiveConfig{})
	if err != nil {
		t.Fatal(err)
	}
	fs := f.session(t)

	// The fake speaks without pause and drains the client; the client
	// streams audio from several goroutines and stops reading its events
	// after a few, so its receiver is blocked on a full channel.
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
				err := s.SendAudio(chunk)
				if err != nil && !errors.Is(err, transport.ErrBackpressure) {
					sendErrs <- err
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	for range 20 {
		nextEvent(t, s)
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
		if err := <-sendErrs; !errors.Is(err, geminilive.ErrClosed) {
			t.Errorf("send after Close = %v, want ErrClosed", err)
		}
	}
	waitClosed(t, s) // Events is closed (possibly after buffered events)
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	wg.Wait() // the fake noticed the hang-up: its emitter and reader ended
	must(t, f.srv.Close())
	noLeak(t, before)
}

func TestResumeWithTheHandleFromAResumptionEvent(t *testing.T) {
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{})
	first := connect(t, m, transport.LiveConfig{History: []transport.Entry{{Role: transport.RoleUser, Text: "hi"}}})
	fs1 := f.session(t)
	if ev := clientEvent(t, fs1); ev.Kind != fakegemini.EventClientContent {
		t.Fatalf("first session got %s, want its history seed", ev.Kind)
	}
	fs1.SetState("order 42 discussed")
	if _, err := fs1.SendResumptionUpdate(true); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, first)
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
