package mcp_test

import (
	"testing"

	"github.com/turnstile-gw/turnstile/internal/mcptest"
)

func TestIsErrorResultIsADomainErrorWithTheServersTextAndType(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	f := startHub(t, map[string]any{"notes": map[string]any{"url": srv.URL}}, nil)
	reg := f.registry()

	cases := []struct {
		name, args         string
		typ, msg, code     string
		retryable, partial bool
	}{
		{"plain text", `{"message": "title too vague"}`, "PERMANENT", "title too vague", "", false, false},
		{"server's type", `{"message": "ticket already open", "error": {"type": "CONFLICT", "code": "duplicate"}}`,
			"CONFLICT", "ticket already open", "duplicate", false, false},
		{"retryable type", `{"message": "slow down", "error": {"type": "RATE_LIMIT"}}`, "RATE_LIMIT", "slow down", "", true, false},
		{"server says partial", `{"message": "half written", "error": {"type": "TRANSIENT", "partialSideEffects": true, "retryable": false}}`,
			"TRANSIENT", "half written", "", false, true},
		{"not a server's type", `{"message": "nope", "error": {"type": "BUDGET_EXCEEDED"}}`, "PERMANENT", "nope", "", false, false},
		{"unknown type", `{"message": "nope", "error": {"type": "WEIRD"}}`, "PERMANENT", "nope", "", false, false},
		{"message only in structured content", `{"message": "", "error": {"message": "no such order"}}`, "PERMANENT", "no such order", "", false, false},
		{"no message at all", `{"message": ""}`, "PERMANENT", "the MCP server notes reported an error without a message", "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := execute(t, reg, f.metrics, "notes__fail", c.args)
			e := out.Envelope.Error
			if out.Envelope.OK || e == nil {
				t.Fatalf("isError answered %+v", out.Response)
			}
			if string(e.Type) != c.typ || e.Message != c.msg || e.Code != c.code || e.Retryable != c.retryable || e.PartialSideEffects != c.partial {
				t.Errorf("error %+v, want type %s, message %q, code %q, retryable %v, partial %v", *e, c.typ, c.msg, c.code, c.retryable, c.partial)
			}
			if typ, msg := errorOf(out); typ != c.typ || msg != c.msg {
				t.Errorf("the model got %s %q", typ, msg)
			}
		})
	}
}
