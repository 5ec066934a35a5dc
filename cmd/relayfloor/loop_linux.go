package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/turnstile-gw/turnstile/internal/audiob64"
)

// The event loop: the floor of a relay that does not give every socket a
// goroutine (-loop). After the set-up (done on the handler's goroutine,
// with gobwas/ws's handshakes), both sockets of a session leave Go's
// poller and join one epoll set that a single goroutine waits on: a
// readable socket is read once (level-triggered: what is left raises the
// next wait at once), every whole frame in what was read is relayed, and
// a frame is written to the other socket in one system call (what the
// socket does not take waits for its EPOLLOUT). No goroutine is woken per
// message, no lock is taken per message.
//
// It is an instrument: no write deadline, no read limit beyond the loop's
// buffer, and a session ends (both sockets closed) on anything unexpected.

type loop struct {
	epfd int
	mu   sync.Mutex
	ends map[int32]*end // by socket; the loop's goroutine reads it under mu
	rbuf []byte         // what one read takes
	wbuf []byte         // the frame being built
	key  uint32         // the next mask key (xorshift)
	hr   bytes.Reader   // frame headers are read from it, and written to hw, by gobwas/ws
	hw   sliceWriter
	hbuf [ws.MaxHeaderSize]byte // gobwas/ws's scratch: 12 bytes to read a header, 14 to write one
	stop [2]int                 // a pipe: Close writes, the loop returns
	done chan struct{}          // closed when the loop has returned
}

// end is one socket of a session: the browser's (server side: its frames
// come masked) or the upstream's (client side: ours go masked).
type end struct {
	fd     int
	client bool
	peer   *end
	pend   []byte // the start of a frame not yet whole
	out    []byte // what the socket did not take yet
	closed bool
}

const loopReadSize = 256 << 10

func newLoop() (*loop, error) {
	l := &loop{ends: map[int32]*end{}, rbuf: make([]byte, loopReadSize), wbuf: make([]byte, 0, 64<<10),
		key: 0x9e3779b9, done: make(chan struct{})}
	fd, err := newEpoll(&l.stop)
	if err != nil {
		return nil, err
	}
	l.epfd = fd
	go l.run()
	return l, nil
}

// newEpoll is an epoll set that watches the read ends of pipes made for
// it (non-blocking, close-on-exec), each of which a loop reads as a
// command.
func newEpoll(pipes ...*[2]int) (int, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("epoll: %w", err)
	}
	for _, p := range pipes {
		err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK)
		if err == nil {
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(p[0])}
			err = syscall.EpollCtl(fd, syscall.EPOLL_CTL_ADD, p[0], &ev)
		}
		if err != nil {
			_ = syscall.Close(fd)
			return -1, fmt.Errorf("epoll: %w", err)
		}
	}
	return fd, nil
}

// Close ends the loop and every session in it.
func (l *loop) Close() {
	_, _ = syscall.Write(l.stop[1], []byte{0})
	<-l.done
	l.mu.Lock()
	for _, e := range l.ends {
		l.drop(e)
	}
	l.mu.Unlock()
	for _, fd := range []int{l.stop[0], l.stop[1], l.epfd} {
		_ = syscall.Close(fd)
	}
}

// serveLoop is ServeHTTP in -loop mode.
func (r *relay) serveLoop(w http.ResponseWriter, req *http.Request) {
	b, brw, _, err := ws.UpgradeHTTP(req, w)
	if err != nil {
		return
	}
	up, err := r.startLoop(req.Context(), b, brw)
	if err != nil {
		log.Printf("relayfloor: session start: %v", err)
		_ = b.Close()
		return
	}
	if err := r.loop.add(b, up); err != nil {
		log.Printf("relayfloor: %v", err)
	}
}

func (r *relay) startLoop(ctx context.Context, b net.Conn, brw *bufio.ReadWriter) (net.Conn, error) {
	if brw.Reader.Buffered() > 0 {
		return nil, errors.New("the browser sent frames with its handshake")
	}
	for {
		msg, op, err := wsutil.ReadClientData(b)
		if err != nil {
			return nil, err
		}
		if op == ws.OpText && bytes.Contains(msg, []byte(`"session.start"`)) {
			break
		}
	}
	ctx, cancel := context.WithTimeout(ctx, setupWait)
	defer cancel()
	h := http.Header{}
	h.Set("x-goog-api-key", r.key)
	up, br, _, err := ws.Dialer{Header: ws.HandshakeHeaderHTTP(h)}.Dial(ctx, r.live)
	if err != nil {
		return nil, err
	}
	if br != nil {
		_ = up.Close()
		return nil, errors.New("the upstream sent frames with its handshake")
	}
	setup := `{"setup":{"model":"models/` + r.model + `","generationConfig":{"responseModalities":["AUDIO"]}}}`
	if err := wsutil.WriteClientText(up, []byte(setup)); err != nil {
		_ = up.Close()
		return nil, err
	}
	reply, _, err := wsutil.ReadServerData(up)
	if err != nil || !bytes.Contains(reply, []byte(`"setupComplete"`)) {
		_ = up.Close()
		return nil, errors.Join(errors.New("no setupComplete"), err)
	}
	if err := wsutil.WriteServerText(b, []byte(`{"type":"session.ready","sessionId":"floor","mode":"voice","resumed":false,"registryVersion":"none"}`)); err != nil {
		_ = up.Close()
		return nil, err
	}
	return up, nil
}

// add moves the two connections' sockets into the loop.
func (l *loop) add(b, up net.Conn) error {
	bfd, err := detach(b)
	if err != nil {
		_ = up.Close()
		return err
	}
	ufd, err := detach(up)
	if err != nil {
		_ = syscall.Close(bfd)
		return err
	}
	be := &end{fd: bfd}
	ue := &end{fd: ufd, client: true, peer: be}
	be.peer = ue
	l.mu.Lock()
	l.ends[int32(bfd)], l.ends[int32(ufd)] = be, ue
	l.mu.Unlock()
	for _, e := range []*end{be, ue} {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(e.fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, e.fd, &ev); err != nil {
			l.mu.Lock()
			l.drop(be)
			l.mu.Unlock()
			return fmt.Errorf("epoll add: %w", err)
		}
	}
	return nil
}

// detach takes c's socket out of Go's poller: a non-blocking duplicate,
// and c closed.
func detach(c net.Conn) (int, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		return -1, fmt.Errorf("-loop: %T is not a TCP connection", c)
	}
	f, err := tc.File()
	_ = c.Close()
	if err != nil {
		return -1, err
	}
	fd, err := syscall.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		return -1, err
	}
	syscall.CloseOnExec(fd)
	return fd, syscall.SetNonblock(fd, true)
}

func (l *loop) run() {
	defer close(l.done)
	events := make([]syscall.EpollEvent, 256)
	for {
		n, err := syscall.EpollWait(l.epfd, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			log.Printf("relayfloor: epoll wait: %v", err)
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(l.stop[0]) {
				return
			}
			l.mu.Lock()
			e := l.ends[ev.Fd]
			l.mu.Unlock()
			if e == nil || e.closed {
				continue
			}
			if ev.Events&syscall.EPOLLOUT != 0 {
				l.flush(e)
			}
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && !e.closed {
				l.readable(e)
			}
		}
	}
}

// readable reads e once and relays every whole frame.
func (l *loop) readable(e *end) {
	buf := l.rbuf
	n0 := copy(buf, e.pend)
	n, err := syscall.Read(e.fd, buf[n0:])
	if errors.Is(err, syscall.EAGAIN) {
		return
	}
	if err != nil || n == 0 {
		l.end(e)
		return
	}
	data := buf[:n0+n]
	for {
		h, hl, ok := l.parseHeader(data)
		if !ok || int64(len(data)-hl) < h.Length {
			break
		}
		p := data[hl : hl+int(h.Length)]
		data = data[hl+int(h.Length):]
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		if !l.frame(e, h, p) {
			l.end(e)
			return
		}
	}
	e.pend = append(e.pend[:0], data...)
}

// parseHeader reads the frame header at the start of b with gobwas/ws
// (ok false: b holds only part of it, or a frame larger than the loop's
// reads); n is its size.
func (l *loop) parseHeader(b []byte) (h ws.Header, n int, ok bool) {
	l.hr.Reset(b)
	h, err := ws.ReadHeaderBuffer(&l.hr, l.hbuf[:])
	if err != nil {
		return h, 0, false
	}
	return h, len(b) - l.hr.Len(), h.Length <= loopReadSize/2
}

// frame relays one frame read from e; false ends the session.
func (l *loop) frame(e *end, h ws.Header, p []byte) bool {
	if !h.Fin {
		return false // fragmented messages: not in the load
	}
	switch h.OpCode {
	case ws.OpClose:
		return false
	case ws.OpPing:
		return l.send(e, ws.OpPong, append(l.start(), p...))
	case ws.OpPong:
		return true
	}
	if e.client { // the model's: audio parts down as binary frames
		for rest := p; ; {
			i := bytes.Index(rest, dataKey)
			if i < 0 {
				return true
			}
			rest = rest[i+len(dataKey):]
			j := bytes.IndexByte(rest, '"')
			if j < 0 {
				return true
			}
			b := slices.Grow(l.start(), audiob64.DecodedLen(j))
			k, err := audiob64.Decode(b[len(b):cap(b)], rest[:j])
			if err != nil || !l.send(e.peer, ws.OpBinary, b[:len(b)+k]) {
				return false
			}
			rest = rest[j+1:]
		}
	}
	if h.OpCode == ws.OpText { // the browser's: a ping, or nothing the load sends
		if isPing(p) {
			return l.send(e, ws.OpText, append(l.start(), pong...))
		}
		return true
	}
	b := append(l.start(), audioPrefix...)
	b = audiob64.AppendEncode(b, p)
	return l.send(e.peer, ws.OpText, append(b, audioSuffix...))
}

// room is the most a frame's header takes: start leaves it in front of
// the payload that send is then given.
const room = ws.MaxHeaderSize

// start is the loop's frame buffer, empty, with room for a header.
func (l *loop) start() []byte { return l.wbuf[:room] }

// send frames the payload b[room:] (b from start, perhaps grown) to e and
// writes it in one system call; masked when e is the upstream.
func (l *loop) send(e *end, op ws.OpCode, b []byte) bool {
	l.wbuf = b[:0] // keep what it grew to
	p := b[room:]
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p)), Masked: e.client}
	if e.client {
		l.key ^= l.key << 13
		l.key ^= l.key >> 17
		l.key ^= l.key << 5
		binary.BigEndian.PutUint32(h.Mask[:], l.key)
		ws.Cipher(p, h.Mask, 0)
	}
	n := ws.HeaderSize(h)
	l.hw.b = b[room-n : room-n]
	if ws.WriteHeaderBuffer(&l.hw, h, l.hbuf[:]) != nil {
		return false
	}
	return l.write(e, b[room-n:])
}

// sliceWriter is where gobwas/ws writes a frame's header: into the room
// left for it in front of the payload.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// write writes frame to e, keeping what the socket does not take.
func (l *loop) write(e *end, frame []byte) bool {
	if e.closed {
		return false
	}
	if len(e.out) > 0 {
		e.out = append(e.out, frame...)
		return true
	}
	n, err := syscall.Write(e.fd, frame)
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		return false
	}
	if n < 0 {
		n = 0
	}
	if n < len(frame) {
		e.out = append(e.out, frame[n:]...)
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLOUT, Fd: int32(e.fd)}
		return syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, e.fd, &ev) == nil
	}
	return true
}

// flush writes what e kept, and stops watching EPOLLOUT once it is out.
func (l *loop) flush(e *end) {
	n, err := syscall.Write(e.fd, e.out)
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		l.end(e)
		return
	}
	if n > 0 {
		e.out = e.out[:copy(e.out, e.out[n:])]
	}
	if len(e.out) == 0 {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(e.fd)}
		_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, e.fd, &ev)
	}
}

// end closes both sockets of e's session.
func (l *loop) end(e *end) {
	l.mu.Lock()
	l.drop(e)
	l.mu.Unlock()
}

// drop closes e and its peer; l.mu is held.
func (l *loop) drop(e *end) {
	for _, x := range []*end{e, e.peer} {
		if !x.closed {
			x.closed = true
			delete(l.ends, int32(x.fd))
			_ = syscall.Close(x.fd) // leaves the epoll set with its last descriptor
		}
	}
}
