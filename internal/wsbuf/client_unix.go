//go:build unix

package wsbuf

import (
	"net"
)

// readLean is ReadLean on unix. Reads are made by one goroutine at a
// time: the HTTP transport's while it reads the handshake's response,
// then the WebSocket's reader, which also calls waitFill (Parking.Wait).
type readLean struct {
	net.Conn // writes, Close, addresses, deadlines
	sockReader

	// handshake: until the end of the response's header (crlf counts the
	// "\r\n\r\n" seen so far), a read returns no byte past it, so that
	// the transport's reader keeps none of the WebSocket's frames: they
	// stay here, where Parking.Wait can see them (with parking only).
	handshake bool
	crlf      int
	// werr is what waitFill's read failed with, for the next Read.
	werr error
}

func newReadLean(c, sock net.Conn, pk *Parking) net.Conn {
	_, raw, ok := rawSocket(sock)
	if !ok {
		return c
	}
	rl := &readLean{Conn: c}
	rl.init(raw)
	if pk != nil {
		rl.handshake = true
		pk.lean = rl
	}
	return rl
}

// Read reads the socket (see sockReader.Read).
func (c *readLean) Read(p []byte) (int, error) {
	if c.in == nil && c.werr != nil {
		err := c.werr
		c.werr = nil
		return 0, err
	}
	if c.handshake {
		return c.readHeader(p)
	}
	return c.sockReader.Read(p)
}

// readHeader reads into a pooled chunk and returns no byte past the end
// of the response's header.
func (c *readLean) readHeader(p []byte) (int, error) {
	if c.in == nil {
		if n, err := c.fill(); n == 0 {
			return 0, err
		}
	}
	src := (*c.in)[c.r:]
	end := len(src)
	for i, ch := range src {
		switch {
		case ch == '\n' && (c.crlf == 1 || c.crlf == 3):
			c.crlf++
		case ch == '\r' && (c.crlf == 0 || c.crlf == 2):
			c.crlf++
		case ch == '\r':
			c.crlf = 1
		default:
			c.crlf = 0
		}
		if c.crlf == 4 {
			end = i + 1
			c.handshake = false
			break
		}
	}
	return c.sockReader.Read(p[:min(len(p), end)])
}

// waitFill waits until the socket is readable, holding no buffer, and
// reads what has arrived into a pooled chunk for the next Read; with
// bytes already here it returns at once. Its error is the next Read's.
func (c *readLean) waitFill() {
	if c.in != nil || c.werr != nil || c.handshake {
		return
	}
	if _, err := c.fill(); err != nil {
		c.werr = err
	}
}
