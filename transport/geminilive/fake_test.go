package geminilive_test

import (
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

// liveFake is the fake Gemini server with a LiveScript brain: the test
// plays the model through the sessions it hands out.
type liveFake struct {
	srv    *fakegemini.Server
	script *fakegemini.LiveScript
	addr   string // host:port for a ws:// base URL
}

func startFake(t *testing.T) *liveFake {
	t.Helper()
	srv := fakegemini.New(fakegemini.NewScript(), nil)
	script := fakegemini.NewLiveScript()
	srv.SetLiveBrain(script)
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start fake gemini: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close fake gemini: %v", err)
		}
	})
	addr := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")
	return &liveFake{srv: srv, script: script, addr: addr}
}

// session returns the fake's side of the next connection.
func (f *liveFake) session(t *testing.T) *fakegemini.LiveSession {
	t.Helper()
	select {
	case s := <-f.script.Sessions():
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("the fake saw no Live connection within 5s")
	}
	return nil
}

// clientEvent returns the next message the fake received from the client.
func clientEvent(t *testing.T, fs *fakegemini.LiveSession) fakegemini.ClientEvent {
	t.Helper()
	select {
	case ev, ok := <-fs.Events():
		if !ok {
			t.Fatal("the client hung up")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("the fake received nothing within 5s")
	}
	return fakegemini.ClientEvent{}
}

// must fails the test on an emitter error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
