//go:build unix

package wsbuf

import "net"

// newSockReader reads sock holding no buffer while it waits (a dialled
// plain TCP connection), inside one raw read where it can (stay_linux.go); nil when sock
// has no raw socket.
func newSockReader(sock net.Conn) *sockReader {
	_, r := leanSocket(sock)
	if r != nil {
		r.stayInside()
	}
	return r
}

// leanSocket is the socket under c (walking Unwrapper) and a reader of it
// that holds no buffer while it waits; nil when c has no raw socket.
func leanSocket(c net.Conn) (net.Conn, *sockReader) {
	sock, raw, ok := rawSocket(c)
	if !ok {
		return nil, nil
	}
	r := new(sockReader)
	r.init(raw)
	return sock, r
}

// hold has b, copied, read before the socket.
func (c *sockReader) hold(b []byte) {
	bp := chunks.Get().(*[]byte)
	if len(b) > cap(*bp) {
		nb := make([]byte, len(b))
		bp = &nb
	}
	*bp = append((*bp)[:0], b...)
	c.in, c.r = bp, 0
}
