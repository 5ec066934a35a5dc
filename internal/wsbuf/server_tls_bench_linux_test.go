//go:build linux

package wsbuf

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// BenchmarkServerConnMicFrame: one microphone frame (40 ms of 16 kHz
// audio, 1280 bytes, binary and masked) from a browser over TLS on a
// TLSListener, taken by the ServerConn: on an event loop by its fast path,
// or off a loop by its reader, one frame at a time (the browser writes the
// next once the last was taken), with the process's user and system CPU a
// frame. The browser's side, its TLS included, is in the figures too, the
// same for both.
func BenchmarkServerConnMicFrame(b *testing.B) {
	for _, loop := range []bool{true, false} {
		b.Run(map[bool]string{true: "wss-loop", false: "wss-off"}[loop], func(b *testing.B) {
			l := testLoop(b)
			got := make(chan struct{}, 1)
			ready := make(chan error, 1)
			addr, cfg := tlsAcceptServer(b, func(c *ServerConn) {
				if _, _, err := serverRead(c); err != nil {
					ready <- err
					return
				}
				if loop {
					ready <- c.Attach(l, 0)
					c.SetFast(func(binary bool, p []byte) bool {
						got <- struct{}{}
						return true
					})
				} else {
					ready <- nil
				}
				buf := make([]byte, 0, 4096)
				for {
					if _, err := c.Next(); err != nil {
						return
					}
					var err error
					if buf, err = c.ReadBody(buf); err != nil {
						return
					}
					got <- struct{}{}
				}
			})
			c, _ := tlsRawClient(b, addr, cfg, false, clientFrame(ws.OpText, true, "start"), nil)
			if err := <-ready; err != nil {
				b.Fatal(err)
			}
			msg := clientFrame(ws.OpBinary, true, strings.Repeat("m", 1280))
			var r0, r1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				<-got
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
			b.ReportMetric(float64(tv(r1.Utime)-tv(r0.Utime))/float64(b.N), "user-ns/op")
			b.ReportMetric(float64(tv(r1.Stime)-tv(r0.Stime))/float64(b.N), "sys-ns/op")
			_ = c.Close()
		})
	}
}
