//go:build unix

package wsbuf

import (
	"bufio"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// BenchmarkClientRoundTrip: one message up and its echo back, paced as a
// voice relay's are (the reader waits for every reply), with the client's
// read system calls and the process's user and system CPU (the echoing
// server's included) per round trip.
func BenchmarkClientRoundTrip(b *testing.B) {
	url := rawWS(b, func(c net.Conn, br *bufio.Reader) {
		for {
			h, p, err := readClientFrame(br)
			if err != nil || h.OpCode == ws.OpClose {
				return
			}
			if ws.WriteFrame(c, ws.NewFrame(ws.OpBinary, true, p)) != nil {
				return
			}
		}
	})
	c := clientDial(b, url, DialOptions{})
	msg := make([]byte, 1300)
	buf := make([]byte, 4096)
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	reads := c.lean.sysReads
	b.ReportAllocs()
	for b.Loop() {
		if err := c.WriteText(msg); err != nil {
			b.Fatal(err)
		}
		c.Wait()
		if err := c.Next(); err != nil {
			b.Fatal(err)
		}
		for {
			_, err := c.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	b.ReportMetric(float64(c.lean.sysReads-reads)/float64(b.N), "client-reads/op")
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	b.ReportMetric(float64(tv(r1.Utime)-tv(r0.Utime))/float64(b.N), "user-ns/op")
	b.ReportMetric(float64(tv(r1.Stime)-tv(r0.Stime))/float64(b.N), "sys-ns/op")
}
