//go:build !linux

package evloop

import (
	"errors"
	"net"
)

// Supported reports whether this platform has event loops: Linux only
// (epoll). Elsewhere NewPool and Attach fail, and every socket is served
// as before, by its goroutine.
const Supported = false

var errUnsupported = errors.New("evloop: event loops are Linux only")

// ErrBacklog: see the Linux build.
var ErrBacklog = errors.New("evloop: the peer is not reading: write backlog full")

// FastFunc: see the Linux build.
type FastFunc func(p []byte) (used int, wake bool)

// Pool: see the Linux build; none can be made here.
type Pool struct{}

// NewPool fails: no event loops here.
func NewPool(int) (*Pool, error) { return nil, errUnsupported }

// Loop: see the Linux build.
func (p *Pool) Loop(uint64) *Loop { return nil }

// Close: see the Linux build.
func (p *Pool) Close() {}

// Loop: see the Linux build.
type Loop struct{}

// Conn: see the Linux build; none can be made here.
type Conn struct{ net.Conn }

// Attach fails: no event loops here.
func Attach(*Loop, net.Conn, []byte) (*Conn, error) { return nil, errUnsupported }

func (c *Conn) Wait(FastFunc)  {}
func (c *Conn) SetBacklog(int) {}
func (c *Conn) Buffered() int  { return 0 }
