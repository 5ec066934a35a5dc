package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// echoUpstream is a fake Gemini Live for the relay load: it completes any
// setup and answers every realtimeInput audio chunk at once with one chunk
// of model audio, 1.5 times its size (24 kHz out for 16 kHz in), whose first
// 8 bytes are the chunk's first 8 bytes (the probe header) and the rest
// silence. It is an echo with the real wire shape, not a model: it never
// ends a turn. Point the gateway at it with GEMINI_BASE_URL=http://ADDR.
//
// For phone calls (content) it answers with the chunk's audio itself,
// resampled to 24 kHz by linear interpolation, instead of a header and
// silence: a call's chunks are named by their tone (see callTones), which
// must come back.
type echoUpstream struct {
	srv     *http.Server
	addr    string
	content bool
	wg      sync.WaitGroup
}

// echoReadLimit bounds one client message (an audio chunk is under 1 KiB;
// a setup with tools a few KiB).
const echoReadLimit = 1 << 20

// startEcho serves the echo upstream on addr (host:port, loopback);
// content echoes the audio itself (see echoUpstream).
func startEcho(addr string, content bool) (*echoUpstream, error) {
	if err := checkLoopbackURL("http://"+addr, "http"); err != nil {
		return nil, fmt.Errorf("echo upstream: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("echo upstream: %w", err)
	}
	e := &echoUpstream{addr: ln.Addr().String(), content: content}
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 5 * time.Second}
	e.wg.Go(func() { _ = e.srv.Serve(ln) })
	return e, nil
}

// close stops the server and drops every connection.
func (e *echoUpstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx) // hijacked WebSockets are not waited for
	_ = e.srv.Close()
	e.wg.Wait()
}

func (e *echoUpstream) serve(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(echoReadLimit)
	// The connection ends when the client hangs up or the server closes;
	// no per-read context, so that reads cost no allocation.
	stop := context.AfterFunc(r.Context(), func() { _ = c.CloseNow() })
	defer stop()
	ctx := context.Background()
	if _, _, err := c.Read(ctx); err != nil { // the setup
		return
	}
	if c.Write(ctx, websocket.MessageBinary, []byte(`{"setupComplete":{}}`)) != nil {
		return
	}
	ec := echoer{content: e.content}
	for {
		_, rd, err := c.Reader(ctx)
		if err != nil {
			return
		}
		if ec.in, err = readAll(rd, ec.in[:0]); err != nil {
			return
		}
		if out, ok := ec.answer(ec.in); ok {
			if c.Write(ctx, websocket.MessageBinary, out) != nil {
				return
			}
		}
	}
}

// readAll appends everything r yields to b.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b, nil
			}
			return b, err
		}
	}
}

var (
	realtimeKey  = []byte(`"realtimeInput"`)
	dataKey      = []byte(`"data":"`)
	answerPrefix = []byte(`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"`)
	answerSuffix = []byte(`","mimeType":"audio/pcm;rate=24000"}}]}}}`)
)

// echoer answers one connection's messages; its buffers are reused.
type echoer struct {
	content            bool // answer with the audio itself
	in, in16, pcm, out []byte
}

// answer is the answer to a client message, if it is realtimeInput audio
// with a probe header: the audio's first 8 bytes, then silence, 1.5 times
// the chunk's length in all. Only the header's base64 is decoded.
func (e *echoer) answer(msg []byte) ([]byte, bool) {
	i := bytes.Index(msg, realtimeKey)
	if i < 0 {
		return nil, false
	}
	j := bytes.Index(msg[i:], dataKey)
	if j < 0 {
		return nil, false
	}
	b64 := msg[i+j+len(dataKey):]
	end := bytes.IndexByte(b64, '"')
	if end < 16 || end%4 != 0 {
		return nil, false
	}
	b64 = b64[:end]
	n := len(b64) / 4 * 3
	n -= bytes.Count(b64[len(b64)-2:], []byte("="))
	var hdr [12]byte
	if _, err := base64.StdEncoding.Decode(hdr[:], b64[:16]); err != nil {
		return nil, false
	}
	size := 3 * n / 2
	e.pcm = slices.Grow(e.pcm[:0], size)[:size]
	clear(e.pcm)
	if e.content {
		e.in16 = slices.Grow(e.in16[:0], n)[:n]
		if _, err := base64.StdEncoding.Decode(e.in16, b64); err != nil {
			return nil, false
		}
		upsample(e.pcm, e.in16)
	} else {
		copy(e.pcm, hdr[:probeHeader])
	}
	e.out = append(e.out[:0], answerPrefix...)
	e.out = base64.StdEncoding.AppendEncode(e.out, e.pcm)
	e.out = append(e.out, answerSuffix...)
	return e.out, true
}

// upsample writes PCM16LE src at 16 kHz into dst at 24 kHz (1.5 times as
// long) by linear interpolation: test audio, not a listening resampler.
func upsample(dst, src []byte) {
	n := len(src) / 2
	at := func(i int) float64 { return float64(int16(binary.LittleEndian.Uint16(src[2*min(i, n-1):]))) }
	for j := range len(dst) / 2 {
		pos := float64(2*j) / 3
		i := int(pos)
		v := at(i) + (pos-float64(i))*(at(i+1)-at(i))
		binary.LittleEndian.PutUint16(dst[2*j:], uint16(int16(math.Round(v))))
	}
}
