// Package telephony takes phone calls into the gateway's voice engine: a
// carrier's media stream (JSON frames over a WebSocket) becomes a voice
// session like a browser's. A carrier's protocol — its wire messages, how
// it signs its requests and how a call is told to open a stream — sits
// behind Carrier and Stream, one implementation per carrier package
// (telephony/twilio); everything else here is carrier-neutral.
package telephony

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/turnstile-gw/turnstile/metrics"
)

// Kind is what a carrier's stream frame says.
type Kind uint8

// The frames a media stream carries.
const (
	KindOther Kind = iota // a frame the bridge ignores (connected, unknown events)
	KindStart             // the stream's metadata
	KindMedia             // caller audio: μ-law 8 kHz mono
	KindDTMF              // a keypad digit
	KindMark              // a mark the gateway sent has been played
	KindStop              // the call or the stream ended
)

// Event is one decoded stream frame. Audio is only valid until the next
// Decode on the same Stream.
type Event struct {
	Kind      Kind
	StreamSID string            // start
	CallSID   string            // start
	Params    map[string]string // start: the custom parameters the answer carried
	Audio     []byte            // media: μ-law bytes
	Digit     string            // dtmf
	Mark      string            // mark
}

// ErrBadFrame is a stream frame that is not the carrier's protocol.
var ErrBadFrame = errors.New("telephony: malformed stream frame")

// ErrSignature is a request whose carrier signature is missing or wrong.
var ErrSignature = errors.New("telephony: bad or missing carrier signature")

// Carrier is one carrier's protocol. Implementations are safe for
// concurrent use.
type Carrier interface {
	// Name is the carrier's metric label and route segment ("twilio").
	Name() string
	// Channel is the channel label of its calls' session metrics.
	Channel() metrics.Channel
	// Verify checks a request's carrier signature; publicURL is the URL
	// the carrier called (the gateway's public URL of the request, query
	// included). form is the POST form (nil for the stream upgrade). It
	// returns ErrSignature when the signature is missing or wrong.
	Verify(r *http.Request, publicURL string, form url.Values) error
	// Call reads who is calling from the webhook's form.
	Call(form url.Values) (Call, error)
	// Answer is the webhook's answer telling the carrier to open a
	// bidirectional stream to streamURL with params, and its content type.
	Answer(streamURL string, params []Param) (body []byte, contentType string)
	// NewStream starts the codec of one stream connection.
	NewStream() Stream
}

// Call is a webhook's call identity.
type Call struct {
	ID, From, To string
}

// Param is a custom parameter the answer hands to the stream.
type Param struct{ Name, Value string }

// Stream decodes one stream's frames and encodes the gateway's. It is
// used by one reader and one writer goroutine: Decode by the reader, the
// Append methods by the writer (they read the stream id Decode learned
// from start, so a Stream synchronises that itself).
type Stream interface {
	// Decode parses one frame; the event's Audio aliases the Stream's
	// buffer until the next Decode.
	Decode(frame []byte) (Event, error)
	// AppendMedia appends the frame that plays mulaw (μ-law 8 kHz) to dst.
	AppendMedia(dst, mulaw []byte) []byte
	// AppendMark appends a mark frame: the carrier echoes name back once
	// everything sent before it has been played.
	AppendMark(dst []byte, name string) []byte
	// AppendClear appends the frame that drops the audio the carrier has
	// buffered but not played (barge-in).
	AppendClear(dst []byte) []byte
}
