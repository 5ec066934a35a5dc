package transport

import (
	"crypto/rand"
	"fmt"
)

// NewCallID is a random (version 4) UUID: the ID the gateway gives a tool
// call whose provider sent none, so that every call has an ID of one form
// from tool.call to tool.result, whichever model made it.
func NewCallID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
