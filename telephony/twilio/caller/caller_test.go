package caller

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/telephony"
	"github.com/turnstile-gw/turnstile/telephony/twilio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "test-auth-token"

// carrierSide is the gateway's half of the protocol, from telephony/twilio,
// behind a test server: it checks every signature, answers TwiML with
// signed parameters, and records the stream's events; on media it answers
// the same audio back, then a mark and a clear.
type carrierSide struct {
	t       *testing.T
	srv     *httptest.Server
	carrier *twilio.Carrier
	signer  *telephony.Signer
	events  chan telephony.Event
}

func newCarrierSide(t *testing.T) *carrierSide {
	cs := &carrierSide{t: t, carrier: &twilio.Carrier{AuthToken: token},
		signer: telephony.NewSigner([]byte("gateway key"), nil), events: make(chan telephony.Event, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", cs.webhook)
	mux.HandleFunc("GET /stream", cs.stream)
	mux.HandleFunc("GET /elsewhere", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	})
	cs.srv = httptest.NewServer(mux)
	t.Cleanup(cs.srv.Close)
	return cs
}

func (cs *carrierSide) webhook(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if cs.carrier.Verify(r, cs.srv.URL+"/hook", r.PostForm) != nil {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	call, err := cs.carrier.Call(r.PostForm)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, ct := cs.carrier.Answer("ws"+strings.TrimPrefix(cs.srv.URL, "http")+"/stream", cs.signer.Params(call))
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(body)
}

func (cs *carrierSide) stream(w http.ResponseWriter, r *http.Request) {
	if cs.carrier.Verify(r, "ws"+strings.TrimPrefix(cs.srv.URL, "http")+"/stream", nil) != nil {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = conn.CloseNow() }()
	st := cs.carrier.NewStream()
	ctx := r.Context()
	for {
		_, frame, err := conn.Read(ctx)
		if err != nil {
			return
		}
		ev, err := st.Decode(frame)
		if err != nil {
			cs.t.Errorf("the gateway side cannot decode %s: %v", frame, err)
			return
		}
		if ev.Kind == telephony.KindStart {
			if _, err := cs.signer.Check(ev.Params, ev.CallSID); err != nil {
				cs.t.Errorf("start parameters: %v", err)
			}
		}
		if ev.Kind == telephony.KindMedia {
			ev.Audio = bytes.Clone(ev.Audio)
			for _, out := range [][]byte{st.AppendMedia(nil, ev.Audio), st.AppendMark(nil, "m1"), st.AppendClear(nil)} {
				if conn.Write(ctx, websocket.MessageText, out) != nil {
					return
				}
			}
		}
		cs.events <- ev
	}
}

func (cs *carrierSide) next(t *testing.T) telephony.Event {
	t.Helper()
	select {
	case ev := <-cs.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway side saw no frame")
		return telephony.Event{}
	}
}

// A call made with the caller is understood by the gateway's own codec:
// signatures verify, the start carries the signed parameters, and media,
// dtmf, mark echoes and stop decode as sent; the gateway's media, mark and
// clear come back as such.
func TestCallSpeaksTheProtocolTheGatewayDecodes(t *testing.T) {
	cs := newCarrierSide(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{WebhookURL: cs.srv.URL + "/hook", AuthToken: token, From: "+15550001111", To: "+15550002222"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if ev := cs.next(t); ev.Kind != telephony.KindOther {
		t.Fatalf("first frame kind %v, want connected (other)", ev.Kind)
	}
	if ev := cs.next(t); ev.Kind != telephony.KindStart || ev.CallSID != c.CallSID || ev.StreamSID != c.StreamSID ||
		ev.Params[telephony.ParamFrom] != "+15550001111" {
		t.Fatalf("start = %+v, want call %s stream %s from +15550001111", ev, c.CallSID, c.StreamSID)
	}

	frame := bytes.Repeat([]byte{0x7E, 0xFF}, 80)
	if err := c.SendMedia(ctx, frame); err != nil {
		t.Fatal(err)
	}
	if ev := cs.next(t); ev.Kind != telephony.KindMedia || !bytes.Equal(ev.Audio, frame) {
		t.Fatalf("media arrived as %v with %d bytes, want the 160 sent", ev.Kind, len(ev.Audio))
	}
	for _, want := range []Message{{Kind: Media, Audio: frame}, {Kind: Mark, Name: "m1"}, {Kind: Clear}} {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != want.Kind || !bytes.Equal(m.Audio, want.Audio) || m.Name != want.Name {
			t.Fatalf("gateway frame = %+v, want %+v", m, want)
		}
	}
	if err := c.SendDTMF(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	if ev := cs.next(t); ev.Kind != telephony.KindDTMF || ev.Digit != "1" {
		t.Fatalf("dtmf arrived as %+v", ev)
	}
	if err := c.SendMark(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if ev := cs.next(t); ev.Kind != telephony.KindMark || ev.Mark != "m1" {
		t.Fatalf("mark echo arrived as %+v", ev)
	}
	if err := c.Hangup(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := cs.next(t); ev.Kind != telephony.KindStop {
		t.Fatalf("hang-up arrived as %+v, want stop", ev)
	}
}

// Without the account's auth token the gateway refuses the webhook, and
// Dial says so with the status.
func TestDialReportsARefusedWebhook(t *testing.T) {
	cs := newCarrierSide(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, Config{WebhookURL: cs.srv.URL + "/hook", AuthToken: "wrong", From: "+1", To: "+2"})
	var ae *AnswerError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("Dial with a wrong token: %v, want an AnswerError 403", err)
	}
}

func TestParseTwiMLReadsTheStreamOrWhatItSays(t *testing.T) {
	a, err := parseTwiML([]byte(`<?xml version="1.0"?><Response><Connect><Stream url="wss://gw.example/s">` +
		`<Parameter name="CallSid" value="CA1"/><Parameter name="From" value="+1&amp;2"/></Stream></Connect></Response>`))
	if err != nil || a.StreamURL != "wss://gw.example/s" || a.Params["CallSid"] != "CA1" || a.Params["From"] != "+1&2" {
		t.Fatalf("parseTwiML = %+v, %v", a, err)
	}
	_, err = parseTwiML([]byte(`<Response><Say>We are busy.</Say><Hangup/></Response>`))
	if !errors.Is(err, ErrNoStream) || !strings.Contains(err.Error(), "We are busy.") {
		t.Fatalf("a TwiML without a stream: %v, want ErrNoStream saying what it says", err)
	}
}

// A refused upgrade is told apart from a refused webhook.
func TestDialReportsARefusedStreamUpgrade(t *testing.T) {
	cs := newCarrierSide(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, Config{WebhookURL: cs.srv.URL + "/hook", AuthToken: token, From: "+1", To: "+2",
		StreamURL: "ws" + strings.TrimPrefix(cs.srv.URL, "http") + "/elsewhere"})
	var ae *AnswerError
	if !errors.As(err, &ae) || !ae.Stream || ae.Status != http.StatusForbidden ||
		err.Error() != "caller: the stream upgrade was refused with 403" {
		t.Fatalf("Dial to a refusing stream: %v, want the stream upgrade's 403", err)
	}
}
