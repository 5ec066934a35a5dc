package wsbuf

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// The client side. websocket.Dial takes a 4 KiB bufio.Reader and Writer
// from the library's pools and keeps them for the connection's life (8 KiB
// of an active voice session's upstream), with no option to do otherwise.
// A dial through Transport hands the library the 16- and 256-byte ones of
// smallBufio instead, under a response body (clientBody) that takes a
// pooled buffer only while a frame is being written, over a connection
// made lean for reading by ReadLean (a plain TCP connection; TLS keeps
// buffers of its own). The connection must not negotiate compression.

// ReadLean returns c reading sock, the socket under it, without holding a
// buffer while it waits (as an accepted lean connection does): a read
// waits for the socket to be readable, then reads what has arrived into a
// pooled chunk, or, for a large read, into the caller's buffer. Writes and
// the rest are c's. Where sock has no raw socket, c is returned as it is.
// ctx is the dial's: a connection dialled for a request made with
// WithParking (a plain-text one) is the one that Parking waits on.
func ReadLean(ctx context.Context, c, sock net.Conn) net.Conn {
	pk, _ := ctx.Value(parkingKey{}).(*Parking)
	return newReadLean(c, sock, pk)
}

// Parking lets a dialled connection's reader wait for its next message on
// its own stack rather than deep in coder/websocket's frame-header read
// (about 1.5 KiB of frames: the library's four, bufio's and the body's),
// so that a reader waiting most of its life keeps a small stack. It works
// over plain TCP (ws://, as to a local model server); over TLS, whose
// buffers are its own, Wait returns at once.
type Parking struct {
	body *clientBody
	lean *readLean
}

type parkingKey struct{}

// WithParking returns ctx for websocket.Dial of url through a Transport,
// and the Parking of the connection it dials. For a URL over TLS (wss://,
// https://) it returns ctx as it is and a nil Parking, whose Wait returns
// at once: the socket's bytes are TLS records, not frames.
func WithParking(ctx context.Context, url string) (context.Context, *Parking) {
	scheme, _, _ := strings.Cut(url, "://")
	if !strings.EqualFold(scheme, "ws") && !strings.EqualFold(scheme, "http") {
		return ctx, nil
	}
	pk := new(Parking)
	return context.WithValue(ctx, parkingKey{}, pk), pk
}

// Wait waits, holding no buffer, until the connection has bytes for the
// next frame, unless it has some already; it is called by the
// connection's reader between messages (after the last one was read to
// its end, before Conn.Reader). A read error is the next read's. The
// body hands the library no byte past the frame it reads, so at a frame's
// end the library's buffer is empty and every byte not yet read is here.
// Wait reads outside the library's read lock: a parked connection is
// closed with CloseNow, not Close (whose close handshake reads on the
// closing goroutine).
func (pk *Parking) Wait() {
	if pk == nil || pk.body == nil || pk.lean == nil || pk.body.rleft != 0 || pk.body.nrhdr != 0 {
		return
	}
	pk.lean.waitFill()
}

// Transport is the http.RoundTripper of the http.Client given to
// websocket.Dial (DialOptions.HTTPClient): Base makes the request, and a
// handshake's response (101) gets a body whose writes go out a frame at a
// time from a pooled buffer, and the library small buffers on top of it.
//
// Once a process dials through a Transport, every coder/websocket client
// connection in it gets the small buffers (see smallBufio); dial them all
// through one, or a connection over a plain socket pays a system call per
// 16 bytes read and 256 written.
type Transport struct {
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, err
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return resp, nil
	}
	smallBufio.Do(useSmallBufio)
	body := &clientBody{rwc: rwc}
	if pk, ok := req.Context().Value(parkingKey{}).(*Parking); ok { // a plain-text dial (WithParking)
		body.frames = true
		pk.body = body
	}
	resp.Body = body
	return resp, nil
}

// clientBody is a dialled WebSocket connection as the library sees it:
// reads go through, never past the end of a frame (see Parking), and
// writes are gathered into whole frames
// (the library flushes its small buffer many times a frame) and go out in
// one write each, as they did from the library's 4 KiB buffer: a frame of
// up to chunkSize bytes in one, a longer one a chunkSize at a time. The
// buffer is pooled and held only while a frame is in flight. Write is
// called by one goroutine at a time (under the library's write lock).
type clientBody struct {
	rwc io.ReadWriteCloser

	out  *[]byte // from chunks: bytes of frames not yet written; nil between frames
	left int64   // bytes of the current frame still to come; 0 at a frame's start
	hdr  [10]byte
	nhdr int // bytes of hdr collected: a header whose length came in two writes

	// Reading, by one goroutine at a time: with frames (a parked
	// connection), the frame being read, as above; without, reads go
	// straight through.
	frames bool
	rleft  int64
	rhdr   [10]byte
	nrhdr  int
}

func (b *clientBody) Close() error { return b.rwc.Close() }

// Read hands the library the bytes of one frame at most: at a frame's
// start, no more than the header's bytes that give its length, then no
// more than the frame's remaining bytes.
func (b *clientBody) Read(p []byte) (int, error) {
	if !b.frames {
		return b.rwc.Read(p)
	}
	if b.rleft > 0 {
		n, err := b.rwc.Read(p[:min(int64(len(p)), b.rleft)])
		b.rleft -= int64(n)
		return n, err
	}
	p = p[:min(len(p), lengthBytes(b.rhdr[:b.nrhdr])-b.nrhdr)]
	n, err := b.rwc.Read(p)
	b.nrhdr += copy(b.rhdr[b.nrhdr:], p[:n])
	if size := frameLen(b.rhdr[:b.nrhdr]); size > 0 {
		b.rleft = size - int64(b.nrhdr)
		b.nrhdr = 0
	}
	return n, err
}

// Write takes what the library flushed: a frame's header and payload, in
// one piece or several.
func (b *clientBody) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if b.left == 0 { // a frame starts: learn its length from its header
			k := copy(b.hdr[b.nhdr:], p)
			size := frameLen(b.hdr[:b.nhdr+k])
			if size == 0 { // the length is not all here (a header split by a flush)
				b.nhdr += k
				if err := b.buffer(p); err != nil {
					return 0, err
				}
				return n, nil
			}
			b.left = size - int64(b.nhdr)
			b.nhdr = 0
		}
		m := int(min(b.left, int64(len(p))))
		seg := p[:m]
		p = p[m:]
		b.left -= int64(m)
		if b.out == nil && b.left == 0 { // the whole frame, or its end, is here
			if _, err := b.rwc.Write(seg); err != nil {
				return 0, err
			}
			continue
		}
		if err := b.buffer(seg); err != nil {
			return 0, err
		}
		if b.left == 0 && b.out != nil {
			if err := b.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// buffer appends seg to the bytes not yet written, writing them out a full
// chunk at a time.
func (b *clientBody) buffer(seg []byte) error {
	for len(seg) > 0 {
		if b.out == nil {
			b.out = chunks.Get().(*[]byte)
			*b.out = (*b.out)[:0]
		}
		o := *b.out
		k := copy(o[len(o):cap(o)], seg)
		*b.out = o[:len(o)+k]
		seg = seg[k:]
		if len(*b.out) == cap(*b.out) {
			if err := b.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the bytes gathered and gives the buffer back.
func (b *clientBody) flush() error {
	out := b.out
	b.out = nil
	_, err := b.rwc.Write(*out)
	chunks.Put(out)
	return err
}

// lengthBytes is how many of a frame's first bytes give its length (2, 4
// or 10), given h, its first bytes so far.
func lengthBytes(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	switch h[1] & 0x7f {
	case 126:
		return 4
	case 127:
		return 10
	}
	return 2
}

// frameLen is the length, header included, of the frame whose header h
// starts with (RFC 6455 §5.2), or 0 when h is too short to tell.
func frameLen(h []byte) int64 {
	if len(h) < 2 {
		return 0
	}
	n := int64(2)
	if h[1]&0x80 != 0 {
		n += 4 // the masking key
	}
	switch l := int64(h[1] & 0x7f); l {
	case 126:
		if len(h) < 4 {
			return 0
		}
		return n + 2 + int64(binary.BigEndian.Uint16(h[2:]))
	case 127:
		if len(h) < 10 {
			return 0
		}
		return n + 8 + int64(binary.BigEndian.Uint64(h[2:]))
	default:
		return n + l
	}
}

// The library's buffers for a dialled connection (see pools.go): bufio's
// smallest reader, enough for a frame's header, and a writer that a frame
// of up to 256 bytes (a pong, audioStreamEnd) fills once.
const (
	clientReadBufio  = 16
	clientWriteBufio = 256
)

var smallBufio sync.Once

// useSmallBufio has the library's pools make small buffers when they are
// empty. Buffers the library gives back when a connection closes go back
// to the same pools, so once set, the pools hold only small ones.
func useSmallBufio() {
	libraryReaders.New = func() any { return bufio.NewReaderSize(nil, clientReadBufio) }
	libraryWriters.New = func() any { return bufio.NewWriterSize(nil, clientWriteBufio) }
}
