package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/turnstile-gw/turnstile/gateway"
)

// A program embeds Turnstile: the configuration is read as the binary
// reads it (here from no flags and an empty environment: the offline demo
// model, an embedded Redis, dev mode on loopback), then changed in code,
// and the gateway serves until the context ends.
func Example() {
	cfg, err := gateway.LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		panic(err)
	}
	cfg.Addr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0" // free ports
	cfg.SystemPrompt = "You are the help desk of Example Ltd."

	ctx, stop := context.WithCancel(context.Background())
	gw, err := gateway.New(ctx, cfg, gateway.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := gw.Listen(); err != nil { // Serve would listen too; here we want the URLs first
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()

	resp, err := http.Get(gw.AdminURL() + "/healthz")
	if err != nil {
		panic(err)
	}
	_ = resp.Body.Close()
	fmt.Println("healthz:", resp.Status)

	stop() // SIGTERM's equivalent: drain, then return
	fmt.Println("served until stopped:", <-served)
	// Output:
	// healthz: 200 OK
	// served until stopped: <nil>
}
