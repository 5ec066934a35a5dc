package geminilive_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/auth"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// rotatingToken hands out a new access token on every call ("tok-1",
// "tok-2", …), each already expired, so that the token cache the SDK puts
// around a client's credentials asks for a new one every time, as it does
// once a real token has expired; it fails with err when that is set.
type rotatingToken struct {
	mu  sync.Mutex
	n   int
	err error
}

func (r *rotatingToken) Token(context.Context) (*auth.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	r.n++
	return &auth.Token{Value: "tok-" + strconv.Itoa(r.n), Type: "Bearer", Expiry: time.Now().Add(-time.Second)}, nil
}

// A voice session on Vertex AI: the fake's Vertex Live endpoint sees a
// bearer token (a fresh one on each connect, so a reconnect after the token
// expired is accepted), the model's full resource name, and audio flows
// both ways as on the Gemini API.
func TestVertexSessionsCarryAFreshTokenAndTheFullModelName(t *testing.T) {
	f := startFake(t)
	src := &rotatingToken{}
	m := geminilive.New(newVertexClient(t, f.addr, src), testModel, geminilive.Options{})

	for i := 1; i <= 2; i++ {
		s := connect(t, m, transport.LiveConfig{System: "Be brief."})
		fs := f.session(t)
		if fs.API != fakegemini.VertexAI || fs.APIVersion != "v1beta1" {
			t.Fatalf("connect %d reached the %s API %s, want Vertex AI v1beta1", i, fs.API, fs.APIVersion)
		}
		if got, want := fs.Header.Get("Authorization"), "Bearer tok-"+strconv.Itoa(i); got != want {
			t.Errorf("connect %d: Authorization %q, want %q", i, got, want)
		}
		if fs.Header.Get("x-goog-api-key") != "" {
			t.Errorf("connect %d sent an API key", i)
		}
		su := fs.Setup
		if su.Project != testProject || su.Location != testLocation || su.Model != testModel ||
			!strings.HasPrefix(su.ModelName, "projects/"+testProject+"/locations/"+testLocation+"/publishers/google/models/") {
			t.Errorf("connect %d: setup model %q (project %q, location %q)", i, su.ModelName, su.Project, su.Location)
		}

		r := receive(t, s)
		must(t, s.SendAudio(make([]byte, 640)))
		if ev := clientEvent(t, fs); ev.Kind != fakegemini.EventAudio || len(ev.Data) != 640 {
			t.Fatalf("the fake got %s with %d bytes, want 640 bytes of audio", ev.Kind, len(ev.Data))
		}
		must(t, fs.SendAudio(make([]byte, 960)))
		if ev := nextEvent(t, r); ev.Kind != transport.LiveAudio || len(ev.Audio) != 960 {
			t.Fatalf("the adapter got %v with %d bytes, want 960 bytes of model audio", ev.Kind, len(ev.Audio))
		}
		must(t, s.Close())
	}
}

func TestVertexConnectFailsWhenTheCredentialsGiveNoToken(t *testing.T) {
	f := startFake(t)
	src := &rotatingToken{err: errors.New("metadata server: no service account")}
	m := geminilive.New(newVertexClient(t, f.addr, src), testModel, geminilive.Options{})
	_, err := m.Connect(t.Context(), transport.LiveConfig{})
	if err == nil || !strings.Contains(err.Error(), "no service account") {
		t.Fatalf("Connect = %v, want the credentials' error", err)
	}
	select {
	case s := <-f.script.Sessions():
		t.Fatalf("the adapter dialled without a token (session %s)", s.ID)
	default:
	}
}
