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
