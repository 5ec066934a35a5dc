package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/turnstile-gw/turnstile/server"
)

// tokenCommand prints a browser token for a user, signed with
// TURNSTILE_AUTH_SECRET: `gateway token --user NAME [--ttl D]`.
func tokenCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "", "the token's subject (the user id)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token stays valid")
	secret := fs.String("auth-secret", "", "HS256 secret (default: $TURNSTILE_AUTH_SECRET)")
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
	tok, err := server.MintToken([]byte(*secret), *user, *ttl)
	if err != nil {
		fmt.Fprintf(stderr, "gateway token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}
