package fakegemini

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

func TestLiveCloseCodesSurfaceInTheSDK(t *testing.T) {
	cases := []struct {
		code   int
		reason string
	}{
		{1007, "Request contains an invalid argument."},
		{1008, "Requested entity was not found."},
		{1011, "Internal error occurred."},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			brain := NewLiveScript()
			srv, base := startLive(t, brain)
			c := connectLive(t, base, nil)
			c.skipSetupComplete(t)
			s := takeSession(t, brain)
			if err := s.Close(tc.code, tc.reason); err != nil {
				t.Fatalf("close: %v", err)
			}
			ce := c.closeError(t)
			if ce.Code != tc.code || ce.Text != tc.reason {
				t.Errorf("SDK saw close %d %q, want %d %q", ce.Code, ce.Text, tc.code, tc.reason)
			}
			testwait.For(t, "the connection to end", func() bool { return srv.LiveConnections() == 0 })
		})
	}
}

type liveBrainFunc func(ctx context.Context, s *LiveSession) error

func (f liveBrainFunc) ServeLive(ctx context.Context, s *LiveSession) error { return f(ctx, s) }

func TestLiveBrainEndingClosesTheConnection(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code int
		text string
	}{
		{"nil", nil, 1000, ""},
		{"error", errors.New("boom"), 1011, "Internal error occurred."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := startLive(t, liveBrainFunc(func(_ context.Context, s *LiveSession) error {
				if err := s.SendOutputTranscript("bye"); err != nil {
					return err
				}
				return tc.err
			}))
			c := connectLive(t, base, nil)
			c.skipSetupComplete(t)
			if m := c.next(t); m.ServerContent == nil || m.ServerContent.OutputTranscription == nil {
				t.Fatalf("got %+v, want the transcript sent before the brain returned", m)
			}
			if ce := c.closeError(t); ce.Code != tc.code || ce.Text != tc.text {
				t.Errorf("close %d %q, want %d %q", ce.Code, ce.Text, tc.code, tc.text)
			}
		})
	}
}

func TestLiveRefusesAConnectionWithoutAnAPIKey(t *testing.T) {
	_, base := startLive(t, NewLiveScript())
	conn := rawDial(t, base, "", nil)
	_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"models/m"}}`))
	if ce := rawCloseError(t, conn); ce.Code != 1008 || ce.Text != reasonBadKey {
		t.Errorf("close %d %q, want 1008 %q", ce.Code, ce.Text, reasonBadKey)
	}
}

func TestLiveAcceptsTheKeyAsAQueryParameter(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	conn := rawDial(t, base, "?key=k", nil)
	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"models/m"}}`)); err != nil {
		t.Fatalf("write setup: %v", err)
	}
	typ, data, err := conn.ReadMessage()
	if err != nil || typ != websocket.BinaryMessage || string(data) != `{"setupComplete":{}}` {
		t.Fatalf("got %d %s %v, want a binary setupComplete", typ, data, err)
	}
	if s := takeSession(t, brain); s.Setup.Model != "m" {
		t.Errorf("model %q, want m", s.Setup.Model)
	}
}

func TestLiveRefusesABadSetupOrMessageWith1007(t *testing.T) {
	setup := `{"setup":{"model":"models/m"}}`
	cases := []struct {
		name   string
		frames []string
	}{
		{"model without models/ prefix", []string{`{"setup":{"model":"gemini-x"}}`}},
		{"first message not a setup", []string{`{"clientContent":{"turns":[]}}`}},
		{"not JSON", []string{`hello`}},
		{"unknown message after setup", []string{setup, `{"bogus":{}}`}},
		{"second setup", []string{setup, setup}},
		{"bad base64 audio", []string{setup, `{"realtimeInput":{"audio":{"data":"!!","mimeType":"audio/pcm;rate=16000"}}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := startLive(t, NewLiveScript())
			conn := rawDial(t, base, "", map[string]string{"x-goog-api-key": "k"})
			for _, f := range tc.frames {
				_ = conn.WriteMessage(websocket.TextMessage, []byte(f))
			}
			if ce := rawCloseError(t, conn); ce.Code != 1007 || ce.Text != reasonInvalidArgument {
				t.Errorf("close %d %q, want 1007 %q", ce.Code, ce.Text, reasonInvalidArgument)
			}
		})
	}
}

func TestLiveWithoutALiveBrainClosesWith1008(t *testing.T) {
	_, base := startLive(t, nil)
	_, err := tryConnectLive(t, base, nil)
	if err == nil {
		t.Fatal("Connect succeeded against a server without a Live brain")
	}
	if ce := asCloseError(t, err); ce.Code != 1008 || ce.Text != reasonNotImplemented {
		t.Errorf("close %d %q, want 1008 %q", ce.Code, ce.Text, reasonNotImplemented)
	}
}

func TestLiveUnknownAPIVersionFailsTheHandshake(t *testing.T) {
	_, base := startLive(t, NewLiveScript())
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(v, "")
	}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend: genai.BackendGeminiAPI, APIKey: "k",
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v9"},
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if _, err := client.Live.Connect(context.Background(), liveModel, nil); err == nil || !strings.Contains(err.Error(), "bad handshake") {
		t.Errorf("Connect on v9 = %v, want a bad handshake (HTTP 404)", err)
	}
}

func TestLiveClientHangUpEndsTheSessionCleanly(t *testing.T) {
	brain := NewLiveScript()
	srv, base := startLive(t, brain)
	c := connectLive(t, base, nil)
	s := takeSession(t, brain)
	c.close() // the SDK closes TCP without a close frame: 1006 on our side

	select {
	case <-s.Context().Done():
	case <-time.After(liveWait):
		t.Fatal("the brain's context did not end when the client hung up")
	}
	for range s.Events() { // drains, then ends: the channel is closed
	}
	if err := s.SendText("anyone?"); err != ErrLiveClosed {
		t.Errorf("emit after hang-up = %v, want ErrLiveClosed", err)
	}
	testwait.For(t, "no live connection", func() bool { return srv.LiveConnections() == 0 && srv.InFlight() == 0 })
}

func TestServerCloseEndsLiveConnections(t *testing.T) {
	brain := NewLiveScript()
	srv, base := startLive(t, brain)
	reading := connectLive(t, base, nil)
	reading.skipSetupComplete(t)
	silent := rawDial(t, base, "", map[string]string{"x-goog-api-key": "k"}) // never reads: no close handshake
	if err := silent.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"models/m"}}`)); err != nil {
		t.Fatalf("write setup: %v", err)
	}
	takeSession(t, brain)
	takeSession(t, brain)

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	if ce := reading.closeError(t); ce.Code != 1001 {
		t.Errorf("close %d %q on shutdown, want 1001", ce.Code, ce.Text)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("server close: %v", err)
		}
	case <-time.After(3 * closeGrace):
		t.Fatal("Server.Close did not return")
	}
	if n := srv.LiveConnections(); n != 0 {
		t.Errorf("LiveConnections after Close = %d", n)
	}
}
