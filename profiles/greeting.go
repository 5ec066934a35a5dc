package profiles

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/protocol"
)

// MaxGreetingChars bounds a profile's greeting: a sentence or two the user
// reads (or hears) first, not a page.
const MaxGreetingChars = 1000

// checkGreeting says what is wrong with a greeting, nil when nothing ("" is
// no greeting).
func checkGreeting(g string) error {
	switch {
	case g == "":
		return nil
	case strings.TrimSpace(g) == "":
		return fmt.Errorf("greeting: blank (leave it out for none)")
	case utf8.RuneCountInString(g) > MaxGreetingChars:
		return fmt.Errorf("greeting: %d characters, at most %d", utf8.RuneCountInString(g), MaxGreetingChars)
	case protocol.HasControl(g):
		return fmt.Errorf("greeting: holds control characters (only tabs and line breaks may be in it)")
	}
	return nil
}
