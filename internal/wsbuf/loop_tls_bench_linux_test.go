//go:build linux

package wsbuf

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// BenchmarkClientModelAudio: one message the size of a model's audio
// message (2 KiB of text, 40 ms of 24 kHz audio in base64 and JSON) from
// the server, taken by the client: on an event loop by its fast path
// (ws://, wss://), or off a loop by its reader (wss://), one message at a
// time as audio comes (the server writes the next once the last was
// taken), with the process's user and system CPU a message. The
// server's side is in the figures too, the same for each but the TLS.
func BenchmarkClientModelAudio(b *testing.B) {
	msg, _ := ws.CompileFrame(ws.NewFrame(ws.OpText, true, bytes.Repeat([]byte("A"), 2048)))
	for _, bc := range []struct {
		name      string
		tls, loop bool
	}{{"ws-loop", false, true}, {"wss-loop", true, true}, {"wss-off", true, false}} {
		b.Run(bc.name, func(b *testing.B) {
			send := make(chan struct{})
			serve := func(c net.Conn, br *bufio.Reader) {
				for range send {
					if _, err := c.Write(msg); err != nil {
						return
					}
				}
			}
			var o DialOptions
			var url string
			if bc.tls {
				url, o.TLSConfig = rawWSS(b, nil, func(c *tls.Conn, br *bufio.Reader) { serve(c, br) })
			} else {
				url = rawWS(b, serve)
			}
			if bc.loop {
				o.Loop = testLoop(b)
			}
			c := clientDial(b, url, o)
			b.Cleanup(func() { close(send) })
			if c.OnLoop() != bc.loop {
				b.Fatalf("on the loop: %v", c.OnLoop())
			}
			got := make(chan struct{}, 1)
			c.SetFast(func(binary bool, p []byte) bool {
				got <- struct{}{}
				return true
			})
			done := make(chan struct{})
			if bc.loop {
				go func() { // the reader waits, the fast path takes every message
					defer close(done)
					c.Wait()
				}()
			} else {
				close(done)
			}
			buf := make([]byte, 4096)
			var r0, r1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			b.ReportAllocs()
			for b.Loop() {
				send <- struct{}{}
				if bc.loop {
					<-got
					continue
				}
				c.Wait()
				if err := c.Next(); err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := c.Read(buf); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
			b.ReportMetric(float64(tv(r1.Utime)-tv(r0.Utime))/float64(b.N), "user-ns/op")
			b.ReportMetric(float64(tv(r1.Stime)-tv(r0.Stime))/float64(b.N), "sys-ns/op")
			_ = c.Close() // ends the reader's wait
			<-done
		})
	}
}
