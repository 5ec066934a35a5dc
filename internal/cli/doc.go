// Package cli holds the gateway binary's operator subcommands that stand on
// their own, without an assembled gateway: `gateway token`, `gateway events
// tail`, `gateway call` and `gateway sleep`. gateway.Main dispatches to them;
// each returns the process's exit status.
package cli
