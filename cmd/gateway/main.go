// Command gateway runs Turnstile: configuration from flags and environment,
// everything wired together, served until SIGINT/SIGTERM, then drained. The
// gateway itself, and its subcommands, are the gateway package.
package main

import (
	"os"

	"github.com/turnstile-gw/turnstile/gateway"
)

func main() {
	os.Exit(gateway.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
