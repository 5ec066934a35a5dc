//go:build unix

package wsbuf

import "net"

// newSockReader reads sock holding no buffer while it waits (a dialled
// plain TCP connection); nil when sock has no raw socket.
func newSockReader(sock net.Conn) *sockReader {
	_, raw, ok := rawSocket(sock)
	if !ok {
		return nil
	}
	r := new(sockReader)
	r.init(raw)
	return r
}
