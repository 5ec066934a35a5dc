package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

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

// BenchmarkSDKInMemoryCall is the SDK alone: its client and server joined
// by its in-memory transport, one tools/call per iteration. It is the floor
// under BenchmarkMCPCall, which the gateway cannot go below.
func BenchmarkSDKInMemoryCall(b *testing.B) {
	s := sdk.NewServer(&sdk.Implementation{Name: "s", Version: "v1"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello"}}}, nil
		})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ss.Close() }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "v1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	params := &sdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text": "hello"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.CallTool(context.Background(), params); err != nil {
			b.Fatal(err)
		}
	}
}
