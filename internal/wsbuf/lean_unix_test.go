//go:build unix

package wsbuf

// leanSizes are the sizes at which the unix lean reader changes course
// (directMin: a read this large goes straight to the socket), for the echo
// tests' message sizes; other systems have no lean reader.
var leanSizes = []int{directMin}

// holdsBuffer reports whether an accepted lean connection holds a read
// chunk or bytes held back to write.
func holdsBuffer(lc *leanConn) bool { return lc.in != nil || lc.nheld != 0 }
