package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/tools"
)

// BenchmarkMCPCall measures one tools/call of a read-only tool through its
// gateway handler (no pipeline): the SDK's JSON-RPC round trip to a real
// server, over stdio (a child process) and Streamable HTTP (loopback).
func BenchmarkMCPCall(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		b.Run(transport, func(b *testing.B) {
			entry := mcptest.StdioConfig("")
			if transport == "http" {
				srv := mcptest.NewHTTP()
				defer srv.Close()
				entry = map[string]any{"url": srv.URL}
			}
			f := startHub(b, map[string]any{"notes": entry}, nil)
			tool, ok := f.registry().Lookup("notes__echo")
			if !ok {
				b.Fatal("no echo tool")
			}
			call := tools.Call{ID: "c1", Args: json.RawMessage(`{"text": "hello"}`)}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if env := tool.Handler.Handle(context.Background(), call); !env.OK {
					b.Fatalf("echo: %+v", env.Error)
				}
			}
		})
	}
}
