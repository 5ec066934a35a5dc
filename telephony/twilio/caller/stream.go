package caller

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/telephony/twilio"
)

// Call is one live Media Stream. Its Send methods may be called from one
// goroutine while another calls Next.
type Call struct {
	conn      *websocket.Conn
	CallSID   string
	StreamSID string
	Params    map[string]string // the parameters start carried

	mu    sync.Mutex // the writer's state
	seq   int        // sequenceNumber of the last frame sent
	chunk int        // media chunks sent
	out   []byte

	in    bytes.Buffer // the reader's frame, reused
	audio []byte       // the last media frame's μ-law, reused
}

// Kind is what a gateway frame asks of Twilio.
type Kind uint8

const (
	// Media is audio to play: μ-law 8 kHz.
	Media Kind = iota + 1
	// Mark asks for the name to be echoed once the audio before it is played.
	Mark
	// Clear drops the audio buffered and not yet played (barge-in).
	Clear
)

// Message is one frame from the gateway. Audio is valid until the next Next.
type Message struct {
	Kind      Kind
	StreamSID string
	Audio     []byte
	Name      string // Mark
}

// frameMs is the audio a media frame carries, for its timestamp.
const frameMs = 20

func (c *Call) start(ctx context.Context) error {
	if err := c.write(ctx, func(b []byte) []byte {
		return append(b, `{"event":"connected","protocol":"Call","version":"1.0.0"}`...)
	}, false); err != nil {
		return err
	}
	params, err := json.Marshal(c.Params)
	if err != nil {
		return fmt.Errorf("caller: start: %w", err)
	}
	return c.write(ctx, func(b []byte) []byte {
		b = append(b, `{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC`...)
		b = append(b, bytes.Repeat([]byte("0"), 32)...)
		b = append(b, `","streamSid":"`...)
		b = append(b, c.StreamSID...)
		b = append(b, `","callSid":"`...)
		b = append(b, c.CallSID...)
		b = append(b, `","tracks":["inbound"],"mediaFormat":{"encoding":"`...)
		b = append(b, twilio.Encoding...)
		b = append(b, `","sampleRate":`...)
		b = strconv.AppendInt(b, twilio.SampleRate, 10)
		b = append(b, `,"channels":`...)
		b = strconv.AppendInt(b, twilio.Channels, 10)
		b = append(b, `},"customParameters":`...)
		b = append(b, params...)
		b = append(b, `},"streamSid":"`...)
		b = append(b, c.StreamSID...)
		return append(b, `"}`...)
	}, true)
}

// write sends one frame built by build into the writer's buffer; numbered
// frames get the next sequenceNumber first (start takes 1 itself).
func (c *Call) write(ctx context.Context, build func([]byte) []byte, numbered bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if numbered {
		c.seq++
	}
	c.out = build(c.out[:0])
	if err := c.conn.Write(ctx, websocket.MessageText, c.out); err != nil {
		return fmt.Errorf("caller: send: %w", err)
	}
	return nil
}

// appendHead starts a numbered frame: {"event":E,"sequenceNumber":"N".
// Twilio writes "event" first; the gateway's fast path for media relies
// on it.
func (c *Call) appendHead(b []byte, event string) []byte {
	b = append(b, `{"event":"`...)
	b = append(b, event...)
	b = append(b, `","sequenceNumber":"`...)
	b = strconv.AppendInt(b, int64(c.seq), 10)
	return append(b, '"')
}

func (c *Call) appendTail(b []byte) []byte {
	b = append(b, `,"streamSid":"`...)
	b = append(b, c.StreamSID...)
	return append(b, `"}`...)
}

// SendMedia sends one media frame of the caller's μ-law audio (160 bytes
// for Twilio's 20 ms). It allocates nothing once its buffer has grown.
func (c *Call) SendMedia(ctx context.Context, mulaw []byte) error {
	return c.write(ctx, func(b []byte) []byte {
		c.chunk++
		b = c.appendHead(b, "media")
		b = append(b, `,"media":{"track":"inbound","chunk":"`...)
		b = strconv.AppendInt(b, int64(c.chunk), 10)
		b = append(b, `","timestamp":"`...)
		b = strconv.AppendInt(b, int64((c.chunk-1)*frameMs), 10)
		b = append(b, `","payload":"`...)
		b = base64.StdEncoding.AppendEncode(b, mulaw)
		b = append(b, `"}`...)
		return c.appendTail(b)
	}, true)
}

// SendDTMF sends a keypad digit (0-9, *, #).
func (c *Call) SendDTMF(ctx context.Context, digit string) error {
	q, _ := json.Marshal(digit)
	return c.write(ctx, func(b []byte) []byte {
		b = c.appendHead(b, "dtmf")
		b = append(b, `,"dtmf":{"track":"inbound_track","digit":`...)
		b = append(b, q...)
		b = append(b, '}')
		return c.appendTail(b)
	}, true)
}

// SendMark echoes a mark the gateway sent, as Twilio does once the audio
// sent before it has been played.
func (c *Call) SendMark(ctx context.Context, name string) error {
	q, _ := json.Marshal(name)
	return c.write(ctx, func(b []byte) []byte {
		b = c.appendHead(b, "mark")
		b = append(b, `,"mark":{"name":`...)
		b = append(b, q...)
		b = append(b, '}')
		return c.appendTail(b)
	}, true)
}

// Hangup ends the call as Twilio does when the caller hangs up: stop, then
// a normal close.
func (c *Call) Hangup(ctx context.Context) error {
	err := c.write(ctx, func(b []byte) []byte {
		b = c.appendHead(b, "stop")
		b = append(b, `,"stop":{"accountSid":"AC`...)
		b = append(b, bytes.Repeat([]byte("0"), 32)...)
		b = append(b, `","callSid":"`...)
		b = append(b, c.CallSID...)
		b = append(b, `"}`...)
		return c.appendTail(b)
	}, true)
	if err != nil {
		_ = c.conn.CloseNow()
		return err
	}
	return c.conn.Close(websocket.StatusNormalClosure, "caller hung up")
}

// Close drops the connection without a stop: a call whose stream is lost.
func (c *Call) Close() error { return c.conn.CloseNow() }

// CloseStatus is the WebSocket close code of err from Next, or -1: how the
// gateway ended the call (a hang-up is a normal closure).
func CloseStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }

// The messages the gateway sends; media is read in place.
var (
	mediaPrefix = []byte(`{"event":"media"`)
	payloadKey  = []byte(`"payload":"`)
)

type outbound struct {
	Event     string `json:"event"`
	StreamSID string `json:"streamSid"`
	Media     *struct {
		Payload string `json:"payload"`
	} `json:"media"`
	Mark *struct {
		Name string `json:"name"`
	} `json:"mark"`
}

// ErrBadFrame is a gateway frame that is not Twilio's protocol.
var ErrBadFrame = errors.New("caller: malformed frame from the gateway")

// Next reads the gateway's next frame. When the gateway ends the call the
// error's CloseStatus tells how.
func (c *Call) Next(ctx context.Context) (Message, error) {
	typ, r, err := c.conn.Reader(ctx)
	if err != nil {
		return Message{}, err
	}
	c.in.Reset()
	if _, err := c.in.ReadFrom(r); err != nil {
		return Message{}, err
	}
	if typ != websocket.MessageText {
		return Message{}, fmt.Errorf("%w: a binary frame", ErrBadFrame)
	}
	frame := c.in.Bytes()
	if bytes.HasPrefix(frame, mediaPrefix) && bytes.Count(frame, payloadKey) == 1 {
		i := bytes.Index(frame, payloadKey) + len(payloadKey)
		if n := bytes.IndexByte(frame[i:], '"'); n >= 0 {
			return c.media(frame[i : i+n])
		}
	}
	var m outbound
	if err := json.Unmarshal(frame, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	switch {
	case m.Event == "media" && m.Media != nil:
		return c.media([]byte(m.Media.Payload))
	case m.Event == "mark" && m.Mark != nil:
		return Message{Kind: Mark, StreamSID: m.StreamSID, Name: m.Mark.Name}, nil
	case m.Event == "clear":
		return Message{Kind: Clear, StreamSID: m.StreamSID}, nil
	}
	return Message{}, fmt.Errorf("%w: event %q", ErrBadFrame, m.Event)
}

func (c *Call) media(b64 []byte) (Message, error) {
	n := base64.StdEncoding.DecodedLen(len(b64))
	if cap(c.audio) < n {
		c.audio = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(c.audio[:n], b64)
	if err != nil {
		return Message{}, fmt.Errorf("%w: media payload is not base64", ErrBadFrame)
	}
	return Message{Kind: Media, StreamSID: c.StreamSID, Audio: c.audio[:n]}, nil
}
