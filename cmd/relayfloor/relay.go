package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/audiob64"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
)

// relay serves the browsers' WebSocket (ServeHTTP) and opens one Live
// session for each.
type relay struct {
	live, key, model string
	loop             *loop     // -loop: sessions move to an event loop after their set-up
	coro             *coroLoop // -coro: browsers' readers run as coroutines of an event loop after the set-up
}

const (
	readLimit   = 1 << 20
	setupWait   = 10 * time.Second
	writeBound  = 5 * time.Second
	audioPrefix = `{"realtimeInput":{"audio":{"data":"`
	audioSuffix = `","mimeType":"audio/pcm;rate=16000"}}}`
)

var (
	dataKey = []byte(`"data":"`)
	pong    = []byte(`{"type":"pong"}`)
)

// isPing reports whether a browser's text message is a ping (the one
// message besides session.start that the load sends).
func isPing(msg []byte) bool { return bytes.Contains(msg, []byte(`"ping"`)) }

func (r *relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.loop != nil {
		r.serveLoop(w, req)
		return
	}
	if r.coro != nil {
		r.serveCoro(w, req)
		return
	}
	b, err := wsbuf.Accept(w, req, wsbuf.AcceptOptions{})
	if err != nil {
		return
	}
	b.SetReadLimit(readLimit)
	defer b.CloseNow()
	up, err := r.start(req.Context(), b, nil)
	if err != nil {
		log.Printf("relayfloor: session start: %v", err)
		_ = b.Close(4102, "upstream: "+err.Error())
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pump(up, b)
	}()
	err = forward(b, up)
	_ = up.Close()
	<-done
	if !isEnd(err) {
		log.Printf("relayfloor: browser: %v", err)
	}
}

// start waits for the browser's session.start, dials the Live session,
// sends its set-up, waits for setupComplete, and answers session.ready.
// netDial, if not nil, opens the upstream's TCP connection.
func (r *relay) start(ctx context.Context, b *wsbuf.ServerConn, netDial func(context.Context, string, string) (net.Conn, error)) (*wsbuf.Client, error) {
	for {
		binary, err := next(b)
		if err != nil {
			return nil, err
		}
		msg, err := b.ReadBody(nil)
		if err != nil {
			return nil, err
		}
		if binary {
			continue // audio before the session: dropped, as the Node relay does
		}
		if isPing(msg) {
			if err := b.Write(false, pong); err != nil {
				return nil, err
			}
			continue
		}
		if bytes.Contains(msg, []byte(`"session.start"`)) {
			break
		}
	}
	ctx, cancel := context.WithTimeout(ctx, setupWait)
	defer cancel()
	h := http.Header{}
	h.Set("x-goog-api-key", r.key)
	up, err := wsbuf.Dial(ctx, r.live, wsbuf.DialOptions{Header: h, WriteTimeout: writeBound, ReadLimit: readLimit, NetDial: netDial})
	if err != nil {
		return nil, err
	}
	setup := `{"setup":{"model":"models/` + r.model + `","generationConfig":{"responseModalities":["AUDIO"]}}}`
	if err := up.WriteText([]byte(setup)); err != nil {
		_ = up.Close()
		return nil, err
	}
	if err := up.Next(); err != nil {
		_ = up.Close()
		return nil, err
	}
	reply, err := io.ReadAll(up)
	if err != nil || !bytes.Contains(reply, []byte(`"setupComplete"`)) {
		_ = up.Close()
		return nil, errors.Join(errors.New("no setupComplete"), err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	ready := `{"type":"session.ready","sessionId":"` + hex.EncodeToString(id[:]) +
		`","mode":"voice","resumed":false,"registryVersion":"none"}`
	if err := b.Write(false, []byte(ready)); err != nil {
		_ = up.Close()
		return nil, err
	}
	return up, nil
}

// next waits for the browser's next message and reports whether it is
// binary, waiting on the connection's own shallow stack when it is idle
// (wsbuf.ErrIdle); ReadBody then reads it.
func next(b *wsbuf.ServerConn) (binary bool, err error) {
	for {
		binary, err = b.Next()
		if !errors.Is(err, wsbuf.ErrIdle) {
			return binary, err
		}
		b.Wait()
	}
}

// bufs holds the messages' buffers between messages, so that a session
// holds none while it waits (as the gateway's do).
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

// putBuf gives back *bp, with b its last use (perhaps grown).
func putBuf(bp *[]byte, b []byte) { *bp = b[:0]; bufs.Put(bp) }

// forward relays the browser's audio up until the browser's end, which it
// returns.
func forward(b *wsbuf.ServerConn, up *wsbuf.Client) error {
	for {
		binary, err := next(b)
		if err != nil {
			return err
		}
		if err := forwardOne(b, up, binary); err != nil {
			return err
		}
	}
}

// forwardOne reads the browser's message Next found and relays it.
func forwardOne(b *wsbuf.ServerConn, up *wsbuf.Client, binary bool) error {
	ip, op := getBuf(), getBuf()
	msg, err := b.ReadBody(*ip)
	out := *op
	switch {
	case err != nil:
	case !binary:
		if isPing(msg) {
			err = b.Write(false, pong)
		}
	default:
		out = append(out[:0], audioPrefix...)
		out = audiob64.AppendEncode(out, msg)
		out = append(out, audioSuffix...)
		err = up.WriteText(out)
	}
	putBuf(ip, msg)
	putBuf(op, out)
	return err
}

// pump relays the model's audio down until the upstream's end, then
// closes the browser's connection (which ends forward).
func pump(up *wsbuf.Client, b *wsbuf.ServerConn) {
	defer b.CloseNow()
	for {
		up.Wait()
		if err := up.Next(); err != nil {
			if !isEnd(err) {
				log.Printf("relayfloor: upstream: %v", err)
			}
			return
		}
		if err := pumpOne(up, b); err != nil {
			if !isEnd(err) {
				log.Printf("relayfloor: upstream: %v", err)
			}
			return
		}
	}
}

// pumpOne reads the upstream's message Next found and relays its audio.
func pumpOne(up *wsbuf.Client, b *wsbuf.ServerConn) error {
	ip, pp := getBuf(), getBuf()
	msg, err := readAll(up, *ip)
	pcm := *pp
	for rest := msg; err == nil; {
		i := bytes.Index(rest, dataKey)
		if i < 0 {
			break
		}
		rest = rest[i+len(dataKey):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			break
		}
		pcm = slices.Grow(pcm[:0], audiob64.DecodedLen(j))
		var n int
		if n, err = audiob64.Decode(pcm[:cap(pcm)], rest[:j]); err == nil {
			err = b.Write(true, pcm[:n])
		}
		rest = rest[j+1:]
	}
	putBuf(ip, msg)
	putBuf(pp, pcm)
	return err
}

// readAll appends the rest of up's current message to buf.
func readAll(up *wsbuf.Client, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := up.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// isEnd reports an error that is a connection's ordinary end.
func isEnd(err error) bool {
	var ce *wsbuf.CloseError
	return errors.As(err, &ce) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, wsbuf.ErrCloseSent) || errors.Is(err, net.ErrClosed)
}
