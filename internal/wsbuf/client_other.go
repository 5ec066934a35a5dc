//go:build !unix

package wsbuf

import "net"

// sockReader is never made here: a connection reads its socket as
// net.Conn does.
type sockReader struct{ in *[]byte }

func newSockReader(net.Conn) *sockReader { return nil }

func leanSocket(net.Conn) (net.Conn, *sockReader) { return nil, nil }

func (*sockReader) Read([]byte) (int, error) { return 0, nil }

func (*sockReader) fill() (int, error) { return 0, nil }

func (*sockReader) hold([]byte) {}

func (*sockReader) closeStay() {}

func (*sockReader) settled() bool { return true }

func (*sockReader) enter(net.Conn) bool { return false }

func (*sockReader) exit() {}

func (*sockReader) wake() {}

func (*sockReader) kick() {}

func (*sockReader) takeHeld() []byte { return nil }
