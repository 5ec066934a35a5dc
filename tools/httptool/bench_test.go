package httptool_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/httptool"
)

// BenchmarkHTTPToolCall measures one call of a manifest-only HTTP tool
// through its handler (no pipeline): the request with expanded headers, a
// loopback round trip, and decoding the JSON answer.
func BenchmarkHTTPToolCall(b *testing.B) {
	srv, _ := recorder(b, http.StatusOK, "application/json", `{"id": "T-1", "status": "open"}`)
	reg, err := httptool.Load(folder(manifest(`{"url": "`+srv.URL+`", "headers": {"Authorization": "Bearer ${K}"}}`)), "bench",
		httptool.Options{LookupEnv: env(map[string]string{"K": "k"})})
	if err != nil {
		b.Fatal(err)
	}
	tool, _ := reg.Lookup("create_ticket")
	call := tools.Call{ID: "c1", Args: json.RawMessage(`{"title": "Broken grinder"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if env := tool.Handler.Handle(context.Background(), call); !env.OK {
			b.Fatalf("%+v", env.Error)
		}
	}
}

// BenchmarkHTTPToolCallSigned is BenchmarkHTTPToolCall with what a tool
// learns about a call: the identity headers (user, session, call, key, two
// claims) and the HMAC-SHA256 signature of the body.
func BenchmarkHTTPToolCallSigned(b *testing.B) {
	srv, _ := recorder(b, http.StatusOK, "application/json", `{"id": "T-1", "status": "open"}`)
	reg, err := httptool.Load(folder(manifest(`{"url": "`+srv.URL+`", "headers": {"Authorization": "Bearer ${K}"}}`)), "bench",
		httptool.Options{LookupEnv: env(map[string]string{"K": "k"}), SigningSecret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		b.Fatal(err)
	}
	tool, _ := reg.Lookup("create_ticket")
	call := tools.Call{ID: "c1", SessionID: "s_bench", UserID: "alice", IdempotencyKey: "6f1d3a2e-9c4b-8e57-8a0d-5b7e2c9f1a34",
		Claims: tools.Claims{"tenant": "acme", "plan": "pro"}, Args: json.RawMessage(`{"title": "Broken grinder"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if env := tool.Handler.Handle(context.Background(), call); !env.OK {
			b.Fatalf("%+v", env.Error)
		}
	}
}
