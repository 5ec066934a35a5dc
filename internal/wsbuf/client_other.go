//go:build !unix

package wsbuf

import "net"

type readLean struct{ net.Conn }

func newReadLean(c, _ net.Conn, _ *Parking) net.Conn { return c }

func (*readLean) waitFill() {}
