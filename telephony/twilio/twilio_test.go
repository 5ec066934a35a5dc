package twilio

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/telephony"
)

// The worked example of twilio.com/docs/usage/security.
var (
	docToken = "12345"
	docURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	docForm  = url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675310"}, "Digits": {"1234"},
		"From": {"+14158675310"}, "To": {"+18005551212"}}
	docSignature = "GvWf1cFY/Q7PnoempGyD5oXAezc="
)

func TestSignatureMatchesTwiliosDocumentedExample(t *testing.T) {
	if got := SignatureOf(docToken, docURL, docForm); got != docSignature {
		t.Fatalf("signature = %s, want %s", got, docSignature)
	}
}

func TestVerifyRefusesMissingWrongAndTamperedSignatures(t *testing.T) {
	c := &Carrier{AuthToken: docToken}
	cases := []struct {
		name string
		sig  string
		url  string
		form url.Values
		ok   bool
	}{
		{"documented", docSignature, docURL, docForm, true},
		{"default port added", docSignature, "https://mycompany.com:443/myapp.php?foo=1&bar=2", docForm, true},
		{"missing", "", docURL, docForm, false},
		{"not base64", "!!!", docURL, docForm, false},
		{"other URL", docSignature, "https://mycompany.com/myapp.php?foo=1&bar=3", docForm, false},
		{"tampered parameter", docSignature, docURL, withValue(docForm, "Digits", "9999"), false},
		{"added parameter", docSignature, docURL, withValue(docForm, "Extra", "1"), false},
		{"other scheme", docSignature, strings.Replace(docURL, "https", "http", 1), docForm, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", nil)
			if tc.sig != "" {
				r.Header.Set(SignatureHeader, tc.sig)
			}
			err := c.Verify(r, tc.url, tc.form)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, telephony.ErrSignature) {
				t.Fatalf("err = %v, want ErrSignature", err)
			}
		})
	}
}

func TestVerifySignsTheStreamUpgradeByItsURLAlone(t *testing.T) {
	c := &Carrier{AuthToken: "tok"}
	u := "wss://gw.example.com/v1/telephony/twilio/stream"
	r := httptest.NewRequest("GET", "/v1/telephony/twilio/stream", nil)
	r.Header.Set(SignatureHeader, SignatureOf("tok", u, nil))
	if err := c.Verify(r, u, nil); err != nil {
		t.Fatalf("refused: %v", err)
	}
	if err := c.Verify(r, "wss://evil.example.com/v1/telephony/twilio/stream", nil); err == nil {
		t.Fatal("a signature for another host was accepted")
	}
}

func withValue(v url.Values, k, val string) url.Values {
	out := url.Values{}
	for kk, vv := range v {
		out[kk] = append([]string(nil), vv...)
	}
	out.Set(k, val)
	return out
}

func TestAnswerIsTwiMLConnectingAStreamWithParameters(t *testing.T) {
	body, ctype := (&Carrier{}).Answer("wss://gw.example.com/v1/telephony/twilio/stream?a=1&b=2",
		[]telephony.Param{{Name: "CallSid", Value: "CA1"}, {Name: "From", Value: `+1 <555> "&"`}})
	if !strings.HasPrefix(ctype, "text/xml") {
		t.Fatalf("content type %q", ctype)
	}
	var doc struct {
		XMLName xml.Name `xml:"Response"`
		Connect struct {
			Stream struct {
				URL    string `xml:"url,attr"`
				Params []struct {
					Name  string `xml:"name,attr"`
					Value string `xml:"value,attr"`
				} `xml:"Parameter"`
			} `xml:"Stream"`
		} `xml:"Connect"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, body)
	}
	s := doc.Connect.Stream
	if s.URL != "wss://gw.example.com/v1/telephony/twilio/stream?a=1&b=2" || len(s.Params) != 2 ||
		s.Params[1].Name != "From" || s.Params[1].Value != `+1 <555> "&"` {
		t.Fatalf("stream = %+v\n%s", s, body)
	}
}

func TestCallNeedsAValidCallSid(t *testing.T) {
	c := &Carrier{}
	got, err := c.Call(url.Values{"CallSid": {"CA0123"}, "From": {"+100"}, "To": {"+200"}})
	if err != nil || got != (telephony.Call{ID: "CA0123", From: "+100", To: "+200"}) {
		t.Fatalf("call = %+v, %v", got, err)
	}
	for _, sid := range []string{"", "CA 1", `CA"1`, strings.Repeat("a", 65)} {
		if _, err := c.Call(url.Values{"CallSid": {sid}}); err == nil {
			t.Errorf("CallSid %q accepted", sid)
		}
	}
}

// The frames of twilio.com/docs/voice/media-streams/websocket-messages.
const (
	connectedFrame = `{"event":"connected","protocol":"Call","version":"1.0.0"}`
	startFrame     = `{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC0","streamSid":"MZ18ad3ab5a668481ce02b83e7395059f0","callSid":"CA0","tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1},"customParameters":{"From":"+15550100"}},"streamSid":"MZ18ad3ab5a668481ce02b83e7395059f0"}`
	dtmfFrame      = `{"event":"dtmf","streamSid":"MZ18ad3ab5a668481ce02b83e7395059f0","sequenceNumber":"5","dtmf":{"track":"inbound_track","digit":"1"}}`
	markFrame      = `{"event":"mark","sequenceNumber":"4","streamSid":"MZ18ad3ab5a668481ce02b83e7395059f0","mark":{"name":"my label"}}`
	stopFrame      = `{"event":"stop","sequenceNumber":"5","stop":{"accountSid":"AC0","callSid":"CA0"},"streamSid":"MZ18ad3ab5a668481ce02b83e7395059f0"}`
)

func mediaFrame(mulaw []byte) []byte {
	return []byte(`{"event":"media","sequenceNumber":"3","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":"` +
		base64.StdEncoding.EncodeToString(mulaw) + `"},"streamSid":"MZ18ad3ab5a668481ce02b83e7395059f0"}`)
}

func TestDecodeReadsEveryInboundMessage(t *testing.T) {
	s := (&Carrier{}).NewStream()
	ev, err := s.Decode([]byte(connectedFrame))
	if err != nil || ev.Kind != telephony.KindOther {
		t.Fatalf("connected: %+v %v", ev, err)
	}
	ev, err = s.Decode([]byte(startFrame))
	if err != nil || ev.Kind != telephony.KindStart || ev.StreamSID != "MZ18ad3ab5a668481ce02b83e7395059f0" ||
		ev.CallSID != "CA0" || ev.Params["From"] != "+15550100" {
		t.Fatalf("start: %+v %v", ev, err)
	}
	audio := bytes.Repeat([]byte{0xff, 0x7f, 0x00}, 160/3+1)[:160]
	ev, err = s.Decode(mediaFrame(audio))
	if err != nil || ev.Kind != telephony.KindMedia || !bytes.Equal(ev.Audio, audio) {
		t.Fatalf("media: %+v %v", ev, err)
	}
	// The same payload written another way (keys reordered) takes the
	// general path and reads the same.
	other := `{"streamSid":"MZ1","event":"media","media":{"payload":"` + base64.StdEncoding.EncodeToString(audio) + `"}}`
	ev, err = s.Decode([]byte(other))
	if err != nil || !bytes.Equal(ev.Audio, audio) {
		t.Fatalf("reordered media: %+v %v", ev, err)
	}
	ev, err = s.Decode([]byte(dtmfFrame))
	if err != nil || ev.Kind != telephony.KindDTMF || ev.Digit != "1" {
		t.Fatalf("dtmf: %+v %v", ev, err)
	}
	ev, err = s.Decode([]byte(markFrame))
	if err != nil || ev.Kind != telephony.KindMark || ev.Mark != "my label" {
		t.Fatalf("mark: %+v %v", ev, err)
	}
	ev, err = s.Decode([]byte(stopFrame))
	if err != nil || ev.Kind != telephony.KindStop {
		t.Fatalf("stop: %+v %v", ev, err)
	}
}

func TestDecodeRefusesMalformedFrames(t *testing.T) {
	for _, f := range []string{
		``, `[]`, `{"event":1}`, `{}`, `{"event":"media"}`,
		`{"event":"media","media":{"payload":"not base64!"}}`,
		`{"event":"start","start":{"streamSid":"MZ1","callSid":"CA1","mediaFormat":{"encoding":"audio/l16","sampleRate":16000,"channels":1}}}`,
		`{"event":"start","start":{"streamSid":"MZ\"1","callSid":"CA1","mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}}}`,
		`{"event":"start"}`,
		`{"event":"dtmf","dtmf":{"digit":"12"}}`,
		`{"event":"mark"}`,
	} {
		if _, err := (&Stream{}).Decode([]byte(f)); !errors.Is(err, telephony.ErrBadFrame) {
			t.Errorf("%s: err = %v, want ErrBadFrame", f, err)
		}
	}
}

func TestDecodeMediaDoesNotAllocate(t *testing.T) {
	s := &Stream{}
	frame := mediaFrame(make([]byte, 160))
	if _, err := s.Decode(frame); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.Decode(frame) }); n != 0 {
		t.Fatalf("%v allocations per media frame", n)
	}
}

func TestOutboundFramesAreTwiliosMessages(t *testing.T) {
	s := (&Carrier{}).NewStream()
	if _, err := s.Decode([]byte(startFrame)); err != nil {
		t.Fatal(err)
	}
	var media struct {
		Event, StreamSid string
		Media            struct{ Payload string }
	}
	mulaw := []byte{1, 2, 3, 0xff}
	if err := json.Unmarshal(s.AppendMedia(nil, mulaw), &media); err != nil {
		t.Fatal(err)
	}
	if media.Event != "media" || media.StreamSid != "MZ18ad3ab5a668481ce02b83e7395059f0" ||
		media.Media.Payload != base64.StdEncoding.EncodeToString(mulaw) {
		t.Fatalf("media = %+v", media)
	}
	var mark struct {
		Event, StreamSid string
		Mark             struct{ Name string }
	}
	if err := json.Unmarshal(s.AppendMark(nil, `goodbye "1"`), &mark); err != nil {
		t.Fatal(err)
	}
	if mark.Event != "mark" || mark.StreamSid == "" || mark.Mark.Name != `goodbye "1"` {
		t.Fatalf("mark = %+v", mark)
	}
	var clear struct{ Event, StreamSid string }
	if err := json.Unmarshal(s.AppendClear(nil), &clear); err != nil {
		t.Fatal(err)
	}
	if clear.Event != "clear" || clear.StreamSid == "" {
		t.Fatalf("clear = %+v", clear)
	}
}

func TestAppendMediaDoesNotAllocateIntoABigEnoughBuffer(t *testing.T) {
	s := &Stream{}
	_, _ = s.Decode([]byte(startFrame))
	mulaw, dst := make([]byte, 160), make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { dst = s.AppendMedia(dst[:0], mulaw) }); n != 0 {
		t.Fatalf("%v allocations per outbound frame", n)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{connectedFrame, startFrame, dtmfFrame, markFrame, stopFrame,
		string(mediaFrame([]byte{1, 2, 3}))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		s := &Stream{}
		ev, err := s.Decode(frame)
		if err != nil {
			if !errors.Is(err, telephony.ErrBadFrame) {
				t.Fatalf("error %v is not ErrBadFrame", err)
			}
			return
		}
		if ev.Kind == telephony.KindStart && !validSID(ev.StreamSID) {
			t.Fatalf("start accepted an unsafe streamSid %q", ev.StreamSID)
		}
		// Whatever was accepted, outbound frames stay valid JSON.
		if !json.Valid(s.AppendMedia(nil, []byte{1})) || !json.Valid(s.AppendClear(nil)) {
			t.Fatal("an outbound frame is not JSON")
		}
	})
}
