package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/tools"
)

// A tools/call tells the server who the call is for in _meta, as HTTP
// tools are told in headers; a server entry with "identity": false is told
// nothing.
func TestMCPCallCarriesTheUserSessionCallKeyAndClaimsInMeta(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	other := mcptest.NewHTTP()
	defer other.Close()
	f := startHub(t, map[string]any{"notes": map[string]any{"url": srv.URL},
		"thirdparty": map[string]any{"url": other.URL, "identity": false}}, nil)
	reg := f.registry()
	call := tools.Call{ID: "call-9", SessionID: "s_abc", UserID: "alice", Mode: tools.ModeText,
		IdempotencyKey: "k-1", Claims: tools.Claims{"tenant": "acme"}, Args: json.RawMessage(`{"text":"hi"}`)}

	for _, name := range []string{"notes__echo", "thirdparty__echo"} {
		tool, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if env := tool.Handler.Handle(context.Background(), call); !env.OK {
			t.Fatalf("%s: %+v", name, env.Error)
		}
	}
	metas := srv.Metas()
	if len(metas) != 1 {
		t.Fatalf("server saw %d calls", len(metas))
	}
	m := metas[0]
	want := map[string]string{"turnstile/user": "alice", "turnstile/session": "s_abc", "turnstile/call": "call-9",
		"turnstile/idempotencyKey": "k-1"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("_meta %s = %v, want %q", k, m[k], v)
		}
	}
	if c, _ := m["turnstile/claims"].(map[string]any); c["tenant"] != "acme" {
		t.Errorf("_meta turnstile/claims = %v", m["turnstile/claims"])
	}
	om := other.Metas()
	if len(om) != 1 {
		t.Fatalf("the third-party server saw %d calls", len(om))
	}
	for k := range om[0] {
		if len(k) >= 10 && k[:10] == "turnstile/" {
			t.Errorf("the identity:false server got _meta %s", k)
		}
	}
}
