// Package twilio is Twilio's carrier protocol for telephony.Carrier, all in
// this file: the Programmable Voice webhook (its form, its
// X-Twilio-Signature, the TwiML answer <Connect><Stream>) and the
// bidirectional Media Streams messages (connected, start, media, dtmf,
// mark, stop in; media, mark, clear out).
//
// References: twilio.com/docs/usage/security (request validation),
// twilio.com/docs/voice/media-streams/websocket-messages,
// twilio.com/docs/voice/twiml/stream.
package twilio

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/telephony"
)

// SignatureHeader carries Twilio's request signature.
const SignatureHeader = "X-Twilio-Signature"

// The only media format a bidirectional stream carries.
const (
	Encoding   = "audio/x-mulaw"
	SampleRate = 8000
	Channels   = 1
)

// Carrier is Twilio for telephony. The zero value checks no signature; set
// AuthToken (the account's auth token) to check X-Twilio-Signature.
type Carrier struct {
	AuthToken string
}

var _ telephony.Carrier = (*Carrier)(nil)

// Name is "twilio".
func (*Carrier) Name() string { return "twilio" }

// Channel is metrics.ChannelTwilio.
func (*Carrier) Channel() metrics.Channel { return metrics.ChannelTwilio }

// Verify checks X-Twilio-Signature: the base64 HMAC-SHA1, keyed with the
// auth token, of the URL Twilio requested followed by every POST parameter
// as name and value, sorted by name. Twilio signs the URL as its user
// configured it, with or without the scheme's default port, so both are
// tried. With no AuthToken every request passes.
func (c *Carrier) Verify(r *http.Request, publicURL string, form url.Values) error {
	if c.AuthToken == "" {
		return nil
	}
	got, err := base64.StdEncoding.DecodeString(r.Header.Get(SignatureHeader))
	if err != nil || len(got) != sha1.Size {
		return telephony.ErrSignature
	}
	for _, u := range urlVariants(publicURL) {
		if hmac.Equal(got, Sign(c.AuthToken, u, form)) {
			return nil
		}
	}
	return telephony.ErrSignature
}

// Sign is Twilio's signature of a request to rawURL with form parameters
// (nil for none), before base64.
func Sign(authToken, rawURL string, form url.Values) []byte {
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(rawURL))
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vs := append([]string(nil), form[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return mac.Sum(nil)
}

// SignatureOf is the X-Twilio-Signature header value for a request.
func SignatureOf(authToken, rawURL string, form url.Values) string {
	return base64.StdEncoding.EncodeToString(Sign(authToken, rawURL, form))
}

// urlVariants is rawURL as given, and with the scheme's default port
// added or removed.
func urlVariants(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return []string{rawURL}
	}
	def := map[string]string{"https": "443", "wss": "443", "http": "80", "ws": "80"}[u.Scheme]
	if def == "" {
		return []string{rawURL}
	}
	alt := *u
	switch u.Port() {
	case "":
		alt.Host = u.Host + ":" + def
	case def:
		alt.Host = u.Hostname()
		if strings.Contains(alt.Host, ":") {
			alt.Host = "[" + alt.Host + "]"
		}
	default:
		return []string{rawURL}
	}
	return []string{rawURL, alt.String()}
}

// Call reads CallSid, From and To from the voice webhook's form.
func (*Carrier) Call(form url.Values) (telephony.Call, error) {
	c := telephony.Call{ID: form.Get("CallSid"), From: form.Get("From"), To: form.Get("To")}
	if !validSID(c.ID) {
		return c, errors.New("twilio: the webhook has no valid CallSid")
	}
	return c, nil
}

// Answer is TwiML connecting the call to a bidirectional stream at
// streamURL with params as its <Parameter>s.
func (*Carrier) Answer(streamURL string, params []telephony.Param) ([]byte, string) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<Response><Connect><Stream url="`)
	_ = xml.EscapeText(&b, []byte(streamURL))
	b.WriteString(`">`)
	for _, p := range params {
		b.WriteString(`<Parameter name="`)
		_ = xml.EscapeText(&b, []byte(p.Name))
		b.WriteString(`" value="`)
		_ = xml.EscapeText(&b, []byte(p.Value))
		b.WriteString(`"/>`)
	}
	b.WriteString("</Stream></Connect></Response>\n")
	return b.Bytes(), "text/xml; charset=utf-8"
}

// NewStream starts one stream's codec.
func (*Carrier) NewStream() telephony.Stream { return &Stream{} }

// Stream is one Media Streams connection's codec.
type Stream struct {
	sid   atomic.Pointer[string] // the streamSid, from start
	audio []byte                 // the last media frame's μ-law, reused
}

// The messages Twilio sends (only what the gateway reads).
type inbound struct {
	Event     string `json:"event"`
	StreamSID string `json:"streamSid"`
	Start     *struct {
		StreamSID   string `json:"streamSid"`
		CallSID     string `json:"callSid"`
		MediaFormat struct {
			Encoding   string `json:"encoding"`
			SampleRate int    `json:"sampleRate"`
			Channels   int    `json:"channels"`
		} `json:"mediaFormat"`
		CustomParameters map[string]string `json:"customParameters"`
	} `json:"start"`
	Media *struct {
		Payload string `json:"payload"`
	} `json:"media"`
	DTMF *struct {
		Digit string `json:"digit"`
	} `json:"dtmf"`
	Mark *struct {
		Name string `json:"name"`
	} `json:"mark"`
}

// mediaPrefix and payloadKey let a media frame — fifty a second — be read
// without a general JSON decode: Twilio writes "event" first, and the
// payload is base64, which JSON never escapes.
var (
	mediaPrefix = []byte(`{"event":"media"`)
	payloadKey  = []byte(`"payload":"`)
)

// Decode parses one frame. A media frame is read in place: no allocation
// once the audio buffer has grown to a frame.
func (s *Stream) Decode(frame []byte) (telephony.Event, error) {
	frame = bytes.TrimSpace(frame)
	if bytes.HasPrefix(frame, mediaPrefix) && bytes.Count(frame, payloadKey) == 1 {
		i := bytes.Index(frame, payloadKey) + len(payloadKey)
		if n := bytes.IndexByte(frame[i:], '"'); n >= 0 && bytes.IndexByte(frame[i:i+n], '\\') < 0 {
			return s.media(frame[i : i+n])
		}
	}
	var m inbound
	if err := json.Unmarshal(frame, &m); err != nil {
		return telephony.Event{}, fmt.Errorf("%w: %v", telephony.ErrBadFrame, err)
	}
	switch m.Event {
	case "start":
		return s.start(m)
	case "media":
		if m.Media == nil {
			return telephony.Event{}, fmt.Errorf("%w: media without a payload", telephony.ErrBadFrame)
		}
		return s.media([]byte(m.Media.Payload))
	case "dtmf":
		if m.DTMF == nil || len(m.DTMF.Digit) != 1 || !strings.Contains("0123456789*#ABCD", m.DTMF.Digit) {
			return telephony.Event{}, fmt.Errorf("%w: dtmf without a digit", telephony.ErrBadFrame)
		}
		return telephony.Event{Kind: telephony.KindDTMF, Digit: m.DTMF.Digit}, nil
	case "mark":
		if m.Mark == nil {
			return telephony.Event{}, fmt.Errorf("%w: mark without a name", telephony.ErrBadFrame)
		}
		return telephony.Event{Kind: telephony.KindMark, Mark: m.Mark.Name}, nil
	case "stop":
		return telephony.Event{Kind: telephony.KindStop}, nil
	case "":
		return telephony.Event{}, fmt.Errorf("%w: no event", telephony.ErrBadFrame)
	default: // connected, and events added later
		return telephony.Event{Kind: telephony.KindOther}, nil
	}
}

func (s *Stream) start(m inbound) (telephony.Event, error) {
	st := m.Start
	if st == nil {
		return telephony.Event{}, fmt.Errorf("%w: start without its metadata", telephony.ErrBadFrame)
	}
	sid := st.StreamSID
	if sid == "" {
		sid = m.StreamSID
	}
	if !validSID(sid) || !validSID(st.CallSID) {
		return telephony.Event{}, fmt.Errorf("%w: start without a valid streamSid and callSid", telephony.ErrBadFrame)
	}
	f := st.MediaFormat
	if f.Encoding != Encoding || f.SampleRate != SampleRate || f.Channels != Channels {
		return telephony.Event{}, fmt.Errorf("%w: media format %s %d Hz %d channels, want %s %d Hz mono",
			telephony.ErrBadFrame, f.Encoding, f.SampleRate, f.Channels, Encoding, SampleRate)
	}
	s.sid.Store(&sid)
	return telephony.Event{Kind: telephony.KindStart, StreamSID: sid, CallSID: st.CallSID,
		Params: st.CustomParameters}, nil
}

func (s *Stream) media(b64 []byte) (telephony.Event, error) {
	n := base64.StdEncoding.DecodedLen(len(b64))
	if cap(s.audio) < n {
		s.audio = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(s.audio[:n], b64)
	if err != nil {
		return telephony.Event{}, fmt.Errorf("%w: media payload is not base64", telephony.ErrBadFrame)
	}
	return telephony.Event{Kind: telephony.KindMedia, Audio: s.audio[:n]}, nil
}

// streamSID is the id outbound frames carry ("" before start).
func (s *Stream) streamSID() string {
	if p := s.sid.Load(); p != nil {
		return *p
	}
	return ""
}

// AppendMedia appends {"event":"media","streamSid":…,"media":{"payload":…}}.
func (s *Stream) AppendMedia(dst, mulaw []byte) []byte {
	dst = append(dst, `{"event":"media","streamSid":"`...)
	dst = append(dst, s.streamSID()...)
	dst = append(dst, `","media":{"payload":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, mulaw)
	return append(dst, `"}}`...)
}

// AppendMark appends {"event":"mark","streamSid":…,"mark":{"name":…}}.
func (s *Stream) AppendMark(dst []byte, name string) []byte {
	q, _ := json.Marshal(name)
	dst = append(dst, `{"event":"mark","streamSid":"`...)
	dst = append(dst, s.streamSID()...)
	dst = append(dst, `","mark":{"name":`...)
	dst = append(dst, q...)
	return append(dst, `}}`...)
}

// AppendClear appends {"event":"clear","streamSid":…}.
func (s *Stream) AppendClear(dst []byte) []byte {
	dst = append(dst, `{"event":"clear","streamSid":"`...)
	dst = append(dst, s.streamSID()...)
	return append(dst, `"}`...)
}

// validSID accepts Twilio's ids (two letters and 32 hex digits) and
// anything else of letters and digits up to 64: outbound frames carry the
// streamSid unescaped.
func validSID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
