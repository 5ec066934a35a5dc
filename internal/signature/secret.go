package signature

import (
	"errors"
	"fmt"
	"strings"
)

// MinSecretBytes is the shortest signing secret taken: an HMAC key a
// receiver could guess would let anyone sign.
const MinSecretBytes = 32

// CheckSecret refuses an HMAC key a receiver could guess or a header could
// not carry; "" is no key.
func CheckSecret(v string) error {
	switch {
	case v == "":
		return nil
	case len(v) < MinSecretBytes:
		return fmt.Errorf("must be at least %d bytes", MinSecretBytes)
	case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return errors.New("contains control characters")
	}
	return nil
}
