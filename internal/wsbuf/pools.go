package wsbuf

import (
	"sync"
	_ "unsafe" // go:linkname
)

// The pools coder/websocket's Dial takes a connection's bufio.Reader and
// Writer from (dial.go: getBufioReader, getBufioWriter; a client
// connection gives them back when it closes). The library has no option
// for a client's buffer sizes; it takes whatever its pools hold, and its
// pools have no New, so Dial makes 4 KiB ones. Checked against v1.8.15:
// on an upgrade, read dial.go again. TestDialledConnectionEchoesEveryMessageSizeAFrameAWrite
// (the library's first read asks for 16 bytes) fails if Dial stops taking
// these, and the build fails if they are gone.

//go:linkname libraryReaders github.com/coder/websocket.bufioReaderPool
var libraryReaders sync.Pool

//go:linkname libraryWriters github.com/coder/websocket.bufioWriterPool
var libraryWriters sync.Pool
