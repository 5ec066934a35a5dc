package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/audio"
	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/telephony/twilio/caller"
)

// End-to-end tests of phone calls: Twilio's side of a call played by
// telephony/twilio/caller (the webhook with X-Twilio-Signature, the TwiML
// answer, the signed stream upgrade, Media Streams frames), the real
// gateway, the real genai Live client, and a fake Live model played by the
// test.

const testTwilioToken = "twilio-test-auth-token"

// startCallGateway starts a gateway that checks Twilio's signatures.
func startCallGateway(t *testing.T, cfg gateway.Config) (*testGateway, *fakegemini.LiveScript) {
	t.Helper()
	cfg.TwilioAuthToken = gateway.Secret(testTwilioToken)
	return startVoiceGateway(t, cfg, nil)
}

func (g *testGateway) callConfig() caller.Config {
	return caller.Config{WebhookURL: g.url + "/v1/telephony/twilio", AuthToken: testTwilioToken,
		From: "+15550100", To: "+15550199"}
}

// telEvents is turnstile_telephony_events_total for Twilio and one event.
func telEvents(g *testGateway, event string) float64 {
	return testutil.ToFloat64(g.gw.sessions.Metrics.TelephonyEvents.WithLabelValues("twilio", event))
}

// callsActive is sum by (channel) (turnstile_sessions_active) for twilio
// (turnstile_channel_sessions_active, deprecated, is the same).
func callsActive(g *testGateway) float64 {
	var sum float64
	for _, mode := range []string{"text", "voice"} {
		sum += testutil.ToFloat64(g.gw.sessions.Metrics.SessionsActive.WithLabelValues(mode, "twilio"))
	}
	return sum
}

// callsEnded is turnstile_channel_sessions_ended_total{channel="twilio"}
// over every reason.
func callsEnded(g *testGateway) float64 {
	var sum float64
	for _, r := range metrics.DisconnectReasons() {
		sum += testutil.ToFloat64(g.gw.sessions.Metrics.ChannelSessionsEnded.WithLabelValues("twilio", r))
	}
	return sum
}

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dialCall places a call, waits for its upstream Live session, and has
// the model greet the caller (turn 1), as an assistant answering the phone
// does: once the greeting is heard the call is in its conversation (the
// caller's audio before that reaches no model). conv is the call's
// conversion of the model's audio, one stream from the greeting on.
func dialCall(t *testing.T, g *testGateway, script *fakegemini.LiveScript) (*caller.Call, *upstream, *audio.Outbound) {
	t.Helper()
	c, err := caller.Dial(callCtx(t), g.callConfig())
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	u := nextUpstream(t, script)
	greeting := pcm24Tone(440, 0, 2400)
	must(t, u.SendAudio(greeting))
	must(t, u.SendTurnComplete(nil))
	conv := audio.NewOutbound()
	if h := hearUntilMark(t, c); h.mark != "turn:1" || !bytes.Equal(h.mulaw, conv.Convert(nil, greeting)) {
		t.Fatalf("the greeting: %d bytes, mark %q", len(h.mulaw), h.mark)
	}
	return c, u, conv
}

// heard is what the caller got from the gateway up to a mark.
type heard struct {
	mulaw []byte
	kinds []caller.Kind
	mark  string
}

// hearUntilMark reads the gateway's frames up to and including the next
// mark.
func hearUntilMark(t *testing.T, c *caller.Call) heard {
	t.Helper()
	var h heard
	for {
		m, err := c.Next(callCtx(t))
		if err != nil {
			t.Fatalf("reading the call: %v", err)
		}
		if m.StreamSID != c.StreamSID {
			t.Fatalf("frame for stream %q on stream %q", m.StreamSID, c.StreamSID)
		}
		h.kinds = append(h.kinds, m.Kind)
		switch m.Kind {
		case caller.Media:
			h.mulaw = append(h.mulaw, m.Audio...)
		case caller.Mark:
			h.mark = m.Name
			return h
		}
	}
}

// mulawTone is n samples of a tone at 8 kHz, μ-law.
func mulawTone(freq float64, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = audio.EncodeMulaw(int16(8000 * math.Sin(2*math.Pi*freq*float64(i)/8000)))
	}
	return out
}

// pcm24Tone is n samples of a tone at 24 kHz, PCM16LE, starting at sample
// from.
func pcm24Tone(freq float64, from, n int) []byte {
	out := make([]byte, 0, 2*n)
	for i := from; i < from+n; i++ {
		out = binary.LittleEndian.AppendUint16(out, uint16(int16(8000*math.Sin(2*math.Pi*freq*float64(i)/24000))))
	}
	return out
}

func TestPhoneCallReachesTheModelAs16kPCMAndHearsItAs8kMulaw(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, u, conv := dialCall(t, g, script)

	// The call is a voice session with the phone's instructions, and no
	// way "into voice" declared.
	var declared []string
	for _, d := range u.Setup.FunctionDeclarations() {
		declared = append(declared, d.Name)
	}
	if got := strings.Join(declared, ","); strings.Contains(got, "start_voice_session") || !strings.Contains(got, "end_voice_session") {
		t.Fatalf("tools declared on a call: %s", got)
	}
	if sys := u.Setup.SystemInstruction; sys == nil || !strings.Contains(sys.Parts[0].Text, "press 1") {
		t.Fatalf("the model is not told how a caller answers confirmations: %v", sys)
	}

	// Caller → model: one second of 20 ms μ-law frames of a 1 kHz tone
	// arrives as 16 kHz PCM, converted as one stream.
	caller8k := mulawTone(1000, 8000)
	for i := 0; i < len(caller8k); i += audio.MulawFrame {
		if err := c.SendMedia(callCtx(t), caller8k[i:i+audio.MulawFrame]); err != nil {
			t.Fatal(err)
		}
	}
	want16k := audio.NewInbound().Convert(nil, caller8k)
	testwait.For(t, "the caller's audio upstream", func() bool { return len(u.audio()) >= len(want16k) })
	if got := u.audio(); !bytes.Equal(got, want16k) {
		t.Fatalf("the model received %d bytes that differ from the caller's audio at 16 kHz (%d bytes)", len(got), len(want16k))
	}
	for _, ev := range u.ofKind(fakegemini.EventAudio) {
		if ev.MIMEType != "audio/pcm;rate=16000" {
			t.Fatalf("caller audio sent upstream as %q", ev.MIMEType)
		}
	}

	// Model → caller: uneven chunks of 24 kHz PCM come out as one stream of
	// 8 kHz μ-law, followed by the answer's mark.
	var spoken []byte
	at := 0
	for _, n := range []int{2400, 1, 479, 4800, 960} {
		chunk := pcm24Tone(1000, at, n)
		at += n
		spoken = append(spoken, chunk...)
		must(t, u.SendAudio(chunk))
	}
	must(t, u.SendTurnComplete(nil))
	h := hearUntilMark(t, c)
	if want := conv.Convert(nil, spoken); !bytes.Equal(h.mulaw, want) {
		t.Fatalf("the caller heard %d bytes of μ-law that differ from the model's audio at 8 kHz (%d bytes)", len(h.mulaw), len(want))
	}
	if h.mark != "turn:2" {
		t.Fatalf("answer ended with mark %q, want turn:2", h.mark)
	}
	if n := callsActive(g); n != 1 {
		t.Fatalf("channel sessions active = %v, want 1", n)
	}

	// The caller hangs up: the session ends, counted on its channel.
	if err := c.Hangup(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	u.waitEnded()
	testwait.For(t, "the call's end counted", func() bool {
		return callsEnded(g) == 1 && callsActive(g) == 0
	})
	if n := telEvents(g, "webhook"); n != 1 {
		t.Fatalf("webhooks answered = %v, want 1", n)
	}
	if n := telEvents(g, "dropped"); n != 0 {
		t.Fatalf("a call ended by the caller's stop counted as dropped")
	}
}

func TestBargeInOnACallSendsClearAndDropsTheRestOfTheAnswer(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, u, _ := dialCall(t, g, script)

	must(t, u.SendAudio(pcm24Tone(1000, 0, 4800)))
	must(t, u.SendInterrupted())
	// What the model says after the caller spoke over it is not played.
	must(t, u.SendAudio(pcm24Tone(1000, 4800, 4800)))
	must(t, u.SendTurnComplete(nil))
	h := hearUntilMark(t, c)
	clear := -1
	for i, k := range h.kinds {
		if k == caller.Clear {
			clear = i
		}
	}
	if clear < 0 {
		t.Fatalf("no clear on barge-in: %v", h.kinds)
	}
	for _, k := range h.kinds[clear+1:] {
		if k == caller.Media {
			t.Fatalf("audio sent after the clear: %v", h.kinds)
		}
	}
	if len(h.mulaw) > len(audio.NewOutbound().Convert(nil, pcm24Tone(1000, 0, 4800))) {
		t.Fatalf("the caller was sent %d bytes: more than the answer before the barge-in", len(h.mulaw))
	}
	if n := telEvents(g, "clear"); n != 1 {
		t.Fatalf("clears counted = %v, want 1", n)
	}
}

// askForApprovalOnACall has the model call kb_get{shipping}, which the
// policy makes ask for approval, and ask the caller; it returns when the
// caller has heard the question.
func askForApprovalOnACall(t *testing.T, c *caller.Call, u *upstream) {
	t.Helper()
	_, err := u.SendToolCall(getCall("shipping"))
	must(t, err)
	if typ, _ := responseError(u.waitResponses(1)[0]); typ != "CONFIRMATION_REQUIRED" {
		t.Fatalf("first kb_get answered %s, want CONFIRMATION_REQUIRED", typ)
	}
	must(t, u.SendOutputTranscript("Press 1 to approve or 2 to decline."))
	must(t, u.SendAudio(pcm24Tone(440, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, c); h.mark != "turn:2" {
		t.Fatalf("the question ended with mark %q", h.mark)
	}
}

// gatewayNote waits for the next text the gateway wrote to the model
// containing want.
func gatewayNote(t *testing.T, u *upstream, want string) string {
	t.Helper()
	var got string
	testwait.For(t, "a note to the model containing "+want, func() bool {
		for _, ev := range u.ofKind(fakegemini.EventClientContent) {
			if s := ev.UserText(); strings.Contains(s, want) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

func kbGetRuns(g *testGateway) float64 {
	return testutil.ToFloat64(g.gw.sessions.Metrics.ToolCalls.WithLabelValues("kb_get", "ok", "twilio"))
}

func TestKeypadOneApprovesAConfirmationAndTheToolRunsOnce(t *testing.T) {
	g, script := startCallGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet))
	c, u, _ := dialCall(t, g, script)
	askForApprovalOnACall(t, c, u)

	if err := c.SendDTMF(callCtx(t), "1"); err != nil {
		t.Fatal(err)
	}
	if note := gatewayNote(t, u, "approved"); !strings.Contains(note, "kb_get") {
		t.Fatalf("model told %q", note)
	}
	// The model calls again: the tool runs, once.
	_, err := u.SendToolCall(getCall("shipping"))
	must(t, err)
	resp := u.waitResponses(2)[1]
	if typ, msg := responseError(resp); typ != "" {
		t.Fatalf("approved kb_get refused %s: %s", typ, msg)
	}
	if n := kbGetRuns(g); n != 1 {
		t.Fatalf("kb_get ran %v times, want 1", n)
	}
	if n := telEvents(g, "dtmf_confirmation"); n != 1 {
		t.Fatalf("keypad confirmations = %v", n)
	}
}

func TestKeypadTwoDeclinesAConfirmationAndTheToolNeverRuns(t *testing.T) {
	g, script := startCallGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet))
	c, u, _ := dialCall(t, g, script)
	askForApprovalOnACall(t, c, u)

	if err := c.SendDTMF(callCtx(t), "2"); err != nil {
		t.Fatal(err)
	}
	gatewayNote(t, u, "declined")
	// A model that calls anyway is asked for approval again; nothing runs.
	_, err := u.SendToolCall(getCall("shipping"))
	must(t, err)
	if typ, _ := responseError(u.waitResponses(2)[1]); typ != "CONFIRMATION_REQUIRED" {
		t.Fatalf("kb_get after the decline answered %s, want CONFIRMATION_REQUIRED", typ)
	}
	if n := kbGetRuns(g); n != 0 {
		t.Fatalf("kb_get ran %v times after a decline", n)
	}
}

func TestKeypadDigitWithoutAQuestionReachesTheModelAsText(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, u, _ := dialCall(t, g, script)
	if err := c.SendDTMF(callCtx(t), "5"); err != nil {
		t.Fatal(err)
	}
	gatewayNote(t, u, "the caller pressed 5")
	if n := telEvents(g, "dtmf_text"); n != 1 {
		t.Fatalf("keypad notes = %v", n)
	}
}

func TestEndVoiceSessionOnACallHangsUpAfterTheGoodbyeMark(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, u, conv := dialCall(t, g, script)

	_, err := u.SendToolCall(fakegemini.Call{Name: "end_voice_session", Args: map[string]any{"reason": "the caller said goodbye"}})
	must(t, err)
	u.waitResponses(1)
	goodbye := pcm24Tone(440, 0, 9600)
	must(t, u.SendOutputTranscript("Goodbye!"))
	must(t, u.SendAudio(goodbye))
	must(t, u.SendTurnComplete(nil))

	h := hearUntilMark(t, c)
	if h.mark != "turn:2" || !bytes.Equal(h.mulaw, conv.Convert(nil, goodbye)) {
		t.Fatalf("the goodbye: %d bytes, mark %q", len(h.mulaw), h.mark)
	}
	h = hearUntilMark(t, c)
	if h.mark != "turnstile:hangup" || len(h.mulaw) != 0 {
		t.Fatalf("after the goodbye: %v, mark %q, want the hang-up mark", h.kinds, h.mark)
	}
	u.waitEnded()
	// The call stays up while the goodbye plays: the caller may still
	// speak, and nothing was hung up yet.
	if err := c.SendMedia(callCtx(t), mulawTone(1000, audio.MulawFrame)); err != nil {
		t.Fatalf("the call was cut before the goodbye played: %v", err)
	}
	if n := telEvents(g, "hangup"); n != 0 {
		t.Fatalf("hung up before the goodbye's mark came back")
	}
	// Twilio echoes the marks as the audio plays out: then the gateway
	// hangs up.
	for _, name := range []string{"turn:1", "turn:2", "turnstile:hangup"} {
		if err := c.SendMark(callCtx(t), name); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Next(callCtx(t))
	if code := caller.CloseStatus(err); code != 1000 {
		t.Fatalf("after the echo: %v (close %d), want a normal closure", err, code)
	}
	testwait.For(t, "the hang-up counted", func() bool {
		return telEvents(g, "hangup") == 1
	})
	noUpstream(t, script)
}

func TestBadTwilioSignatureIsRefusedBeforeTheUpgrade(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	bad := g.callConfig()
	bad.AuthToken = "not-the-token"
	unsigned := g.callConfig()
	unsigned.AuthToken = ""
	for name, cfg := range map[string]caller.Config{"wrong token": bad, "no signature": unsigned} {
		_, err := caller.Webhook(callCtx(t), cfg)
		var ae *caller.AnswerError
		if !errors.As(err, &ae) || ae.Status != 403 {
			t.Fatalf("webhook with %s: %v, want 403", name, err)
		}
	}
	// A good webhook, then a stream upgrade that is not Twilio's.
	good := g.callConfig()
	good.CallSID = "CA00000000000000000000000000000001"
	ans, err := caller.Webhook(callCtx(t), good)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]caller.Config{"wrong token": bad, "no signature": unsigned} {
		cfg.CallSID = good.CallSID
		_, err := caller.Open(callCtx(t), cfg, ans)
		var ae *caller.AnswerError
		if !errors.As(err, &ae) || ae.Status != 403 {
			t.Fatalf("stream upgrade with %s: %v, want 403", name, err)
		}
	}
	noUpstream(t, script)
	if n := g.counterSum("turnstile_sessions_started_total"); n != 0 {
		t.Fatalf("%v sessions started for refused requests", n)
	}
	if w, s := telEvents(g, "webhook_refused"),
		telEvents(g, "stream_refused"); w != 2 || s != 2 {
		t.Fatalf("refusals counted: webhook %v, stream %v", w, s)
	}
}

// openCall opens a stream for a webhook's answer; the gateway's first
// frame or close is returned by next.
func openCall(t *testing.T, cfg caller.Config, ans caller.Answer) *caller.Call {
	t.Helper()
	c, err := caller.Open(callCtx(t), cfg, ans)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func expectEnded(t *testing.T, c *caller.Call, code int) {
	t.Helper()
	_, err := c.Next(callCtx(t))
	if got := caller.CloseStatus(err); int(got) != code {
		t.Fatalf("stream ended with %v (close %d), want close %d", err, got, code)
	}
}

func TestTamperedCallParametersEndTheStream(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	cfg := g.callConfig()
	cfg.CallSID = "CA00000000000000000000000000000002"
	ans, err := caller.Webhook(callCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tampered := ans
	tampered.Params = map[string]string{}
	for k, v := range ans.Params {
		tampered.Params[k] = v
	}
	tampered.Params["From"] = "+15550666"
	expectEnded(t, openCall(t, cfg, tampered), 1008)
	unsigned := ans
	unsigned.Params = map[string]string{"CallSid": cfg.CallSID, "From": "+15550100", "To": "+15550199"}
	expectEnded(t, openCall(t, cfg, unsigned), 1008)
	noUpstream(t, script)
	if n := telEvents(g, "stream_bad_params"); n != 2 {
		t.Fatalf("bad parameters counted %v, want 2", n)
	}
}

func TestSecondStreamForTheSameCallIsRefused(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	cfg := g.callConfig()
	cfg.CallSID = "CA00000000000000000000000000000003"
	ans, err := caller.Webhook(callCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := openCall(t, cfg, ans)
	u := nextUpstream(t, script)
	// A second answer for the call (the webhook retried): its own start,
	// refused because the call streams here.
	ans2, err := caller.Webhook(callCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	expectEnded(t, openCall(t, cfg, ans2), 1008)
	// The first answer's start again, while its stream lives here: a
	// replay (TestAReplayedCallStartIsRefusedOnEveryNode: after it ended).
	expectEnded(t, openCall(t, cfg, ans), 1008)
	if n := telEvents(g, "stream_replayed"); n != 1 {
		t.Fatalf("replays counted %v, want 1", n)
	}
	// The node refused both by itself: the first stream's start was the
	// only call_start Redis call.
	if n := redisCalls(t, g, "call_start"); n != 1 {
		t.Fatalf("%d call_start Redis calls, want the first stream's only", n)
	}
	// The first stream goes on.
	must(t, u.SendAudio(pcm24Tone(1000, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, first); len(h.mulaw) == 0 {
		t.Fatal("the first stream heard nothing after the second was refused")
	}
	noUpstream(t, script)
	if n := telEvents(g, "stream_duplicate"); n != 1 {
		t.Fatalf("duplicates counted %v", n)
	}
}

func TestCallStreamDroppedWithoutStopIsEndedAndRecorded(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t)) // a real redis-server
	g, script := startCallGateway(t, cfg)
	c, u, _ := dialCall(t, g, script)
	must(t, u.SendInputTranscript("Where is my parcel?"))
	must(t, u.SendOutputTranscript("It is on its way."))
	must(t, u.SendAudio(pcm24Tone(1000, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	hearUntilMark(t, c)

	_ = c.Close() // the connection is lost: no stop
	u.waitEnded()
	testwait.For(t, "the dropped call counted and ended", func() bool {
		return telEvents(g, "dropped") == 1 &&
			callsEnded(g) == 1
	})
	// The conversation is in the store, under the caller's pseudonym.
	rdb := redisClientFor(t, g.cfg)
	testwait.For(t, "the call's history in the store", func() bool {
		keys, err := rdb.Keys(context.Background(), "turnstile:{*}:meta").Result()
		if err != nil || len(keys) != 1 {
			return false
		}
		id := strings.TrimSuffix(strings.TrimPrefix(keys[0], "turnstile:{"), "}:meta")
		rec, hist, err := storedSession(t, g.cfg, event{"sessionId": id})
		if err != nil || !strings.HasPrefix(rec.UserID, "tel_") || strings.Contains(rec.UserID, "5550100") {
			return false
		}
		var said []string
		for _, e := range hist {
			said = append(said, e.Text)
		}
		return strings.Join(said, "|") == "Where is my parcel?|It is on its way."
	})
}

func TestDrainingNodeKeepsItsCallUntilAGoodbyeAndAnswersNewWebhooks503(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, u, conv := dialCall(t, g, script)

	// A deadline closer than the goodbye lead: the model is asked to say
	// goodbye at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.gw.edge.SetDraining()
	drained := make(chan struct{})
	go func() { defer close(drained); g.gw.sessions.Drain(ctx) }()

	_, err := caller.Webhook(callCtx(t), g.callConfig())
	var ae *caller.AnswerError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("webhook on a draining node: %v, want 503", err)
	}
	gatewayNote(t, u, "goodbye")
	if n := telEvents(g, "drain_goodbye"); n != 1 {
		t.Fatalf("drain goodbyes counted %v", n)
	}
	goodbye := pcm24Tone(440, 0, 4800)
	must(t, u.SendAudio(goodbye))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, c); !bytes.Equal(h.mulaw, conv.Convert(nil, goodbye)) || h.mark != "turn:2" {
		t.Fatalf("the goodbye: %d bytes, mark %q", len(h.mulaw), h.mark)
	}
	if h := hearUntilMark(t, c); h.mark != "turnstile:hangup" {
		t.Fatalf("after the goodbye: mark %q, want the hang-up", h.mark)
	}
	if err := c.SendMark(callCtx(t), "turnstile:hangup"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Next(callCtx(t))
	if code := caller.CloseStatus(err); code != 1000 {
		t.Fatalf("after the goodbye: %v, want a normal closure", err)
	}
	<-drained
	if ctx.Err() != nil {
		t.Fatal("the drain waited for its deadline: the call did not end after the goodbye")
	}
}

func TestPhoneRoutesNeedATwilioTokenOffLoopback(t *testing.T) {
	cfg := defaultTestConfig(t)
	for _, tc := range []struct {
		addr, token string
		on          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{"0.0.0.0:8080", "tok", true},
		{"10.0.0.5:8080", "", false},
	} {
		cfg.Addr, cfg.TwilioAuthToken = tc.addr, gateway.Secret(tc.token)
		if got := cfg.TelephonyOn(); got != tc.on {
			t.Errorf("TURNSTILE_ADDR=%s with token %q: telephony on = %v, want %v", tc.addr, tc.token, got, tc.on)
		}
	}
}

func TestUnsignedCallsWorkOnLoopbackWithoutAToken(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	cfg := g.callConfig()
	cfg.AuthToken = ""
	c, err := caller.Dial(callCtx(t), cfg)
	if err != nil {
		t.Fatalf("unsigned call on loopback: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	u := nextUpstream(t, script)
	must(t, u.SendAudio(pcm24Tone(1000, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, c); len(h.mulaw) == 0 {
		t.Fatal("the unsigned call heard nothing")
	}
}

func TestCallerAudioBeforeTheModelIsUpDoesNotEndTheCall(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	c, err := caller.Dial(callCtx(t), g.callConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// Twilio streams from the first moment, while the model is connected.
	frame := mulawTone(1000, audio.MulawFrame)
	for range 25 {
		if err := c.SendMedia(callCtx(t), frame); err != nil {
			t.Fatal(err)
		}
	}
	u := nextUpstream(t, script)
	must(t, u.SendAudio(pcm24Tone(440, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, c); h.mark != "turn:1" {
		t.Fatalf("after early caller audio: mark %q, want the greeting's", h.mark)
	}
	before := len(u.audio())
	if err := c.SendMedia(callCtx(t), frame); err != nil {
		t.Fatal(err)
	}
	// At least one more frame's worth: the early frames are dropped or
	// forwarded depending on whether the model was up when each arrived,
	// and one still on its way may land after before was read (then the
	// count jumps past before plus one frame: waiting for equality failed
	// under load).
	testwait.For(t, "the caller's audio upstream", func() bool { return len(u.audio()) >= before+audio.InboundLen(len(frame)) })
	if n := telEvents(g, "hangup"); n != 0 {
		t.Fatal("the call was hung up")
	}
}

// startCallPair starts two call gateways sharing a real redis-server, with
// a caller of call sid for each.
func startCallPair(t *testing.T, sid string) (a *testGateway, scriptA *fakegemini.LiveScript, cfgA caller.Config,
	b *testGateway, scriptB *fakegemini.LiveScript, cfgB caller.Config) {
	t.Helper()
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	a, scriptA = startCallGateway(t, cfg)
	b, scriptB = startCallGateway(t, cfg)
	cfgA, cfgB = a.callConfig(), b.callConfig()
	cfgA.CallSID, cfgB.CallSID = sid, sid
	return a, scriptA, cfgA, b, scriptB, cfgB
}

// A carrier may send a call's stream to any node behind the load balancer
// (its webhook retried, a replayed start): the one stream per call holds
// across the fleet, through a lease in Redis. Once that stream has ended
// the call is free again: a call sent back to the webhook (a <Redirect>,
// an operator's update of the live call) gets a new stream and session.
func TestSecondStreamForTheSameCallOnAnotherNodeIsRefused(t *testing.T) {
	a, scriptA, cfgA, b, scriptB, cfgB := startCallPair(t, "CA00000000000000000000000000000018")

	ansA, err := caller.Webhook(callCtx(t), cfgA)
	if err != nil {
		t.Fatal(err)
	}
	first := openCall(t, cfgA, ansA)
	u := nextUpstream(t, scriptA)
	ansB, err := caller.Webhook(callCtx(t), cfgB)
	if err != nil {
		t.Fatal(err)
	}
	expectEnded(t, openCall(t, cfgB, ansB), 1008)
	noUpstream(t, scriptB)
	if n := telEvents(b, "stream_duplicate"); n != 1 {
		t.Fatalf("duplicates counted on the second node: %v, want 1", n)
	}
	// The first stream goes on.
	must(t, u.SendAudio(pcm24Tone(1000, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, first); len(h.mulaw) == 0 {
		t.Fatal("the first stream heard nothing after the second was refused")
	}

	// The caller hangs up: the stream ends, and its lease with it.
	must(t, first.Hangup(callCtx(t)))
	u.waitEnded()
	firstCallFreed(t, a)
	newStartHears(t, cfgB, scriptB, "the call's new stream after the first ended")
}

// A signed start opens one stream: whoever captured it cannot send it again
// once its call has ended, within the five minutes the signature stays
// valid, on this node or another sharing the Redis. A new webhook answer
// (a new signed start) still opens a stream.
func TestAReplayedCallStartIsRefusedOnEveryNode(t *testing.T) {
	a, scriptA, cfgA, b, scriptB, cfgB := startCallPair(t, "CA00000000000000000000000000000023")

	ans, err := caller.Webhook(callCtx(t), cfgA)
	if err != nil {
		t.Fatal(err)
	}
	first := openCall(t, cfgA, ans)
	u := nextUpstream(t, scriptA)
	// The start's record and the call's stream lease are one Redis call,
	// not two.
	if starts, leases := redisCalls(t, a, "call_start"), redisCalls(t, a, "lease_acquire"); starts != 1 || leases != 0 {
		t.Fatalf("the stream's start made %d call_start and %d lease_acquire Redis calls, want 1 and 0", starts, leases)
	}
	must(t, first.Hangup(callCtx(t)))
	u.waitEnded()
	firstCallFreed(t, a)

	// The same start again, on each node: refused before any session.
	expectEnded(t, openCall(t, cfgA, ans), 1008)
	toB := ans
	toB.StreamURL = "ws" + strings.TrimPrefix(b.url, "http") + "/v1/telephony/twilio/stream"
	expectEnded(t, openCall(t, cfgB, toB), 1008)
	noUpstream(t, scriptA)
	noUpstream(t, scriptB)
	if ra, rb := telEvents(a, "stream_replayed"), telEvents(b, "stream_replayed"); ra != 1 || rb != 1 {
		t.Fatalf("replays counted: %v on the first node, %v on the second; want 1 and 1", ra, rb)
	}
	if n := a.counterSum("turnstile_sessions_started_total") + b.counterSum("turnstile_sessions_started_total"); n != 1 {
		t.Fatalf("%v sessions started, want the first call's only", n)
	}

	// The carrier's own new answer for the call is a new start.
	newStartHears(t, cfgB, scriptB, "the call's new stream")
}

// firstCallFreed waits until g's first call has ended and its stream's
// lease is released: the session ends (and is counted) before its stream's
// handler releases the lease, and a new stream on another node is refused
// while the lease is held.
func firstCallFreed(t *testing.T, g *testGateway) {
	t.Helper()
	testwait.For(t, "the first call ended and its lease released", func() bool {
		return callsEnded(g) == 1 && redisCalls(t, g, "lease_release") == 1
	})
}

// redisCalls is how many Redis calls g's store made for op
// (turnstile_redis_duration_seconds' count).
func redisCalls(t *testing.T, g *testGateway, op string) uint64 {
	t.Helper()
	return uint64(seriesSum(t, g.reg, "turnstile_redis_duration_seconds", "op", op))
}

// newStartHears asks the carrier's webhook for a new answer on cfg's node,
// opens its stream and fails unless the caller hears the model's audio.
func newStartHears(t *testing.T, cfg caller.Config, script *fakegemini.LiveScript, what string) {
	t.Helper()
	ans, err := caller.Webhook(callCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := openCall(t, cfg, ans)
	u := nextUpstream(t, script)
	must(t, u.SendAudio(pcm24Tone(1000, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	if h := hearUntilMark(t, call); len(h.mulaw) == 0 {
		t.Fatalf("%s heard nothing", what)
	}
}
