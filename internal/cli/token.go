package cli

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/turnstile-gw/turnstile/server"
)

// defaultTokenTTL is `gateway token`'s lifetime: a working day, well within
// the default TURNSTILE_AUTH_MAX_TTL (24 h).
const defaultTokenTTL = 12 * time.Hour

// Token prints a browser token for a user, signed with
// TURNSTILE_AUTH_SECRET: `gateway token --user NAME [--ttl D]`. It carries
// the gateway's TURNSTILE_AUTH_AUDIENCE and TURNSTILE_AUTH_ISSUER, and its
// lifetime may not exceed TURNSTILE_AUTH_MAX_TTL, so that the gateway
// accepts it.
func Token(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "", "the token's subject (the user id)")
	ttl := fs.Duration("ttl", defaultTokenTTL, "how long the token stays valid (at most TURNSTILE_AUTH_MAX_TTL)")
	secret := fs.String("auth-secret", "", "HS256 secret (default: $TURNSTILE_AUTH_SECRET)")
	audience := fs.String("audience", getenv("TURNSTILE_AUTH_AUDIENCE"), "the token's aud (default: $TURNSTILE_AUTH_AUDIENCE)")
	issuer := fs.String("issuer", getenv("TURNSTILE_AUTH_ISSUER"), "the token's iss (default: $TURNSTILE_AUTH_ISSUER)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *secret == "" {
		*secret = getenv("TURNSTILE_AUTH_SECRET")
	}
	if *secret == "" {
		fmt.Fprintln(stderr, "gateway token: TURNSTILE_AUTH_SECRET (or -auth-secret) is required")
		return 2
	}
	if *user == "" || *ttl <= 0 {
		fmt.Fprintln(stderr, "gateway token: -user is required and -ttl must be positive")
		return 2
	}
	maxTTL := server.DefaultAuthMaxTTL
	if v := getenv("TURNSTILE_AUTH_MAX_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintln(stderr, "gateway token: TURNSTILE_AUTH_MAX_TTL is not a positive duration")
			return 2
		}
		maxTTL = d
	}
	if *ttl > maxTTL {
		fmt.Fprintf(stderr, "gateway token: -ttl %s is longer than TURNSTILE_AUTH_MAX_TTL (%s): the gateway would refuse the token\n",
			*ttl, maxTTL)
		return 2
	}
	tok, err := server.MintTokenFor([]byte(*secret), *user, *ttl, *audience, *issuer)
	if err != nil {
		fmt.Fprintf(stderr, "gateway token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}
