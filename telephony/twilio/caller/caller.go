// Package caller plays Twilio's side of a phone call against a gateway, so
// that a call can be made without a phone number: it posts the voice
// webhook as Twilio does (form and X-Twilio-Signature), reads the TwiML
// answer, opens the <Stream> it names with the upgrade signed by its URL,
// sends Media Streams frames as Twilio sends them (connected, start with the
// answer's <Parameter>s, media, dtmf, mark echoes, stop) and reads what the
// gateway sends back (media, mark, clear).
//
// It is the client of cmd/loadgen's twilio load, of `gateway call` and of
// the telephony tests; telephony/twilio is the gateway's side of the same
// protocol.
package caller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/telephony/twilio"
)

// Config is one call.
type Config struct {
	// WebhookURL is the voice webhook the number points at, as Twilio
	// would request it (http://127.0.0.1:8080/v1/telephony/twilio).
	WebhookURL string
	// AuthToken signs the webhook and the upgrade as Twilio does with the
	// account's auth token; "" sends no signature.
	AuthToken string
	// From and To are the caller's and the called number (E.164).
	From, To string
	// CallSID names the call; "" makes a random one (CA + 32 hex digits).
	CallSID string
	// StreamURL, when set, is dialled instead of the TwiML's <Stream url>
	// (a gateway whose public URL is a proxy in front of it); the upgrade
	// is still signed with the TwiML's URL, as Twilio would.
	StreamURL string
	// HTTPClient makes the webhook request and the upgrade; nil is
	// http.DefaultClient.
	HTTPClient *http.Client
}

// AnswerError is a webhook that did not answer 200 with TwiML (a refused
// signature 403, a draining node 503, a gateway with telephony off), or a
// refused stream upgrade (Stream).
type AnswerError struct {
	Status int
	Body   string // the start of the answer, for a message
	Stream bool   // the stream's upgrade, not the webhook
}

func (e *AnswerError) Error() string {
	if e.Stream {
		return fmt.Sprintf("caller: the stream upgrade was refused with %d", e.Status)
	}
	return fmt.Sprintf("caller: the webhook answered %d: %s", e.Status, e.Body)
}

// ErrNoStream is a TwiML answer that connects no stream (it may only say
// something and hang up); the error's text carries what it says.
var ErrNoStream = errors.New("caller: the TwiML answer connects no stream")

// Answer is what the webhook's TwiML told Twilio to do.
type Answer struct {
	StreamURL string
	Params    map[string]string // the <Parameter>s, handed back in start
	Say       []string          // any <Say> text
}

// readLimit bounds one frame from the gateway (a media frame is about
// 300 bytes a 20 ms; a gateway may join a few).
const readLimit = 1 << 20

// Webhook posts the voice webhook for a call and reads its TwiML answer.
func Webhook(ctx context.Context, cfg Config) (Answer, error) {
	form := url.Values{
		"AccountSid": {"AC" + strings.Repeat("0", 32)}, "CallSid": {cfg.CallSID},
		"From": {cfg.From}, "To": {cfg.To}, "CallStatus": {"ringing"}, "Direction": {"inbound"},
		"ApiVersion": {"2010-04-01"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.WebhookURL, strings.NewReader(form.Encode()))
	if err != nil {
		return Answer{}, fmt.Errorf("caller: webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cfg.AuthToken != "" {
		req.Header.Set(twilio.SignatureHeader, twilio.SignatureOf(cfg.AuthToken, cfg.WebhookURL, form))
	}
	resp, err := client(cfg).Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("caller: webhook: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Answer{}, fmt.Errorf("caller: webhook: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Answer{}, &AnswerError{Status: resp.StatusCode, Body: strings.TrimSpace(string(body[:min(len(body), 200)]))}
	}
	return parseTwiML(body)
}

// twiml is the part of a TwiML <Response> a call follows.
type twiml struct {
	XMLName xml.Name `xml:"Response"`
	Say     []string `xml:"Say"`
	Connect struct {
		Stream *struct {
			URL    string `xml:"url,attr"`
			Params []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"Parameter"`
		} `xml:"Stream"`
	} `xml:"Connect"`
}

func parseTwiML(body []byte) (Answer, error) {
	var t twiml
	if err := xml.Unmarshal(body, &t); err != nil {
		return Answer{}, fmt.Errorf("caller: the webhook's answer is not TwiML: %w", err)
	}
	a := Answer{Say: t.Say}
	if t.Connect.Stream == nil || t.Connect.Stream.URL == "" {
		return a, fmt.Errorf("%w (it says %q)", ErrNoStream, strings.Join(t.Say, " "))
	}
	a.StreamURL = t.Connect.Stream.URL
	a.Params = make(map[string]string, len(t.Connect.Stream.Params))
	for _, p := range t.Connect.Stream.Params {
		a.Params[p.Name] = p.Value
	}
	return a, nil
}

func client(cfg Config) *http.Client {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient
	}
	return http.DefaultClient
}

// Dial places a call: the webhook, then the stream its answer names, then
// connected and start. The call is then live: send media, read the answer.
// A refused upgrade is an *AnswerError with its status.
func Dial(ctx context.Context, cfg Config) (*Call, error) {
	if cfg.CallSID == "" {
		cfg.CallSID = "CA" + randomHex()
	}
	ans, err := Webhook(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg, ans)
}

// Open opens the stream of an answer the webhook gave for cfg.CallSID, as
// Twilio does after the webhook: the upgrade signed by the stream's URL,
// then connected and start with the answer's parameters.
func Open(ctx context.Context, cfg Config, ans Answer) (*Call, error) {
	dialURL := ans.StreamURL
	if cfg.StreamURL != "" {
		dialURL = cfg.StreamURL
	}
	var header http.Header
	if cfg.AuthToken != "" {
		header = http.Header{twilio.SignatureHeader: {twilio.SignatureOf(cfg.AuthToken, ans.StreamURL, nil)}}
	}
	conn, resp, err := websocket.Dial(ctx, dialURL, &websocket.DialOptions{HTTPClient: client(cfg), HTTPHeader: header})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &AnswerError{Status: resp.StatusCode, Stream: true}
		}
		return nil, fmt.Errorf("caller: stream: %w", err)
	}
	conn.SetReadLimit(readLimit)
	c := &Call{conn: conn, CallSID: cfg.CallSID, StreamSID: "MZ" + randomHex(), Params: ans.Params}
	if err := c.start(ctx); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	return c, nil
}

func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
