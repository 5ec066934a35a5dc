//go:build linux

package evloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pair is a Conn on a loop and the plain TCP connection at its other end.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	p, err := NewPool(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-acc
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { peer.Close() })
	c, err := Attach(p.Loop(0), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, peer
}

func TestConnReadsAndWritesAndSeesThePeersEnd(t *testing.T) {
	c, peer := pair(t)
	go func() {
		peer.Write([]byte("hello"))
		peer.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v; want hello and the end", got, err)
	}
	if _, err := c.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	back, err := io.ReadAll(peer)
	if err != nil || string(back) != "back" {
		t.Fatalf("peer read %q, %v", back, err)
	}
}

// lines is a fast path that takes whole lines not starting with '!' and
// hands the first that does (and all after it) to the owner.
type lines struct {
	mu   sync.Mutex
	took []string
}

func (l *lines) fast(p []byte) (int, bool) {
	used := 0
	for {
		i := bytes.IndexByte(p[used:], '\n')
		if i < 0 {
			return used, false
		}
		if p[used] == '!' {
			return used, true
		}
		l.mu.Lock()
		l.took = append(l.took, string(p[used:used+i]))
		l.mu.Unlock()
		used += i + 1
	}
}

func TestWaitGivesWholeMessagesToTheFastPathAndTheRestToTheOwnerInOrder(t *testing.T) {
	c, peer := pair(t)
	var l lines
	go func() {
		// Written in pieces that split lines, so that the fast path sees
		// partial messages and must wait for their rest.
		for _, s := range []string{"a1\na", "2\n", "a3\n!own", "er\na4\n"} {
			peer.Write([]byte(s))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	c.Wait(l.fast)
	buf := make([]byte, 64)
	var owner []byte
	for !bytes.Contains(owner, []byte("a4\n")) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		owner = append(owner, buf[:n]...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := bytes.Join([][]byte{[]byte("a1"), []byte("a2"), []byte("a3")}, []byte(",")); string(bytes.Join(toBytes(l.took), []byte(","))) != string(got) {
		t.Fatalf("fast path took %q; want a1, a2, a3", l.took)
	}
	if string(owner) != "!owner\na4\n" {
		t.Fatalf("owner read %q; want what follows the first line the fast path declined", owner)
	}
}

func toBytes(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i, x := range s {
		out[i] = []byte(x)
	}
	return out
}

func TestWaitReturnsAtThePeersEndWithWhatCameBeforeIt(t *testing.T) {
	c, peer := pair(t)
	var l lines
	peer.Write([]byte("a1\npartial"))
	peer.Close()
	c.Wait(l.fast)
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "partial" {
		t.Fatalf("owner read %q, %v; want the partial message, then the end", rest, err)
	}
	if len(l.took) != 1 || l.took[0] != "a1" {
		t.Fatalf("fast path took %q", l.took)
	}
}

func TestCloseWakesAnOwnerWaitingOrReading(t *testing.T) {
	c, _ := pair(t)
	var l lines
	done := make(chan struct{})
	go func() {
		c.Wait(l.fast)
		_, err := c.Read(make([]byte, 8))
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("read after close: %v", err)
		}
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	<-done
}

func TestReadDeadlineEndsARead(t *testing.T) {
	c, _ := pair(t)
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v; want the deadline's error", err)
	}
}

func TestWritesToAPeerThatDoesNotReadFailPastTheBacklog(t *testing.T) {
	c, _ := pair(t)
	c.SetBacklog(256 << 10)
	chunk := make([]byte, 64<<10)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = c.Write(chunk)
	}
	if !errors.Is(err, ErrBacklog) {
		t.Fatalf("write: %v; want ErrBacklog", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, ErrBacklog) {
		t.Fatalf("a later write: %v; want ErrBacklog again", err)
	}
}

func TestWhatTheSocketDidNotTakeIsWrittenWhenThePeerReads(t *testing.T) {
	c, peer := pair(t)
	c.SetBacklog(64 << 20)
	var want []byte
	for i := 0; c.Buffered() == 0; i++ { // until the socket takes no more at once
		chunk := bytes.Repeat([]byte{byte('a' + i%26)}, 1<<20)
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk...)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the peer read other bytes than were written")
	}
	if n := c.Buffered(); n != 0 {
		t.Fatalf("%d bytes still kept after the peer read them all", n)
	}
}

func TestKeptBytesPastTheWriteDeadlineFailTheWriting(t *testing.T) {
	c, _ := pair(t)
	c.SetBacklog(64 << 20)
	c.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	chunk := make([]byte, 1<<20)
	for c.Buffered() == 0 {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	for err == nil {
		time.Sleep(10 * time.Millisecond)
		_, err = c.Write([]byte("x"))
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write: %v; want the deadline's error", err)
	}
}

// An owner that read part of what arrived, straight from the socket (its
// Read took only as much as it asked for), and then waits does not miss
// the rest: no edge comes for bytes that are already there.
func TestWaitAfterAPartialReadSeesWhatIsLeft(t *testing.T) {
	c, peer := pair(t)
	var l lines
	buf := make([]byte, 4)
	peer.Write([]byte("!ab\na1\n"))   // one segment: the owner's line, then the fast path's
	time.Sleep(20 * time.Millisecond) // arrived, and its edge seen, before the owner reads
	if n, err := io.ReadFull(c, buf); err != nil || string(buf[:n]) != "!ab\n" {
		t.Fatalf("owner read %q, %v", buf[:n], err)
	}
	done := make(chan struct{})
	go func() {
		c.Wait(l.fast)
		close(done)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		n := len(l.took)
		l.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			c.Close() // ends the Wait
			<-done
			t.Fatal("the fast path never got the line left in the socket")
		}
	}
	peer.Write([]byte("!end\n"))
	<-done
	if l.took[0] != "a1" {
		t.Fatalf("fast path took %q", l.took)
	}
}

// The peer's end that came with the owner's message (its edge seen with
// the message's) reaches an owner who waits again after reading it.
func TestWaitAfterTheOwnersMessageSeesThePeersEndThatCameWithIt(t *testing.T) {
	c, peer := pair(t)
	var l lines
	peer.Write([]byte("a1\n!own\n"))
	peer.Close()
	c.Wait(l.fast)
	buf := make([]byte, 64)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "!own\n" {
		t.Fatalf("owner read %q, %v", buf[:n], err)
	}
	c.Wait(l.fast) // returns at the end, rather than wait for an edge that came already
	if n, err := c.Read(buf); err != io.EOF {
		t.Fatalf("owner read %q, %v; want the end", buf[:n], err)
	}
}
