//go:build !linux

package evloop

// Supported reports whether this platform has event loops: Linux only
// (epoll). Elsewhere every socket is served as before, by its goroutine.
const Supported = false
