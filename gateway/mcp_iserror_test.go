package gateway_test

import (
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/mcptest"
)

func TestMCPIsErrorReachesTheModelAsTheServersDomainError(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	cfg := configWith(t, map[string]string{"TURNSTILE_MCP_CONFIG": writeMCPConfig(t, map[string]any{"notes": map[string]any{"url": srv.URL}})})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "notes__fail", Args: map[string]any{"message": "title too vague"}}), textStep("Please say more."),
		callStep(fakegemini.Call{Name: "notes__fail", Args: map[string]any{"message": "ticket already open",
			"error": map[string]any{"type": "CONFLICT"}}}), textStep("It is already open."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)

	for i, want := range []struct{ typ, msg string }{{"PERMANENT", "title too vague"}, {"CONFLICT", "ticket already open"}} {
		evs := c.ask("open a ticket")
		res := ofType(evs, "tool.result")
		if len(res) != 1 || res[0]["ok"] != false || res[0]["refused"] == true || errorType(res[0]) != want.typ {
			t.Fatalf("call %d: tool.result %v, want a %s error of a call that ran", i, res, want.typ)
		}
		r := lastResponses(t, brain.Requests()[2*i+1])[0]
		typ, msg := responseError(r)
		e, _ := r.Response["error"].(map[string]any)
		if typ != want.typ || msg != want.msg || e["partialSideEffects"] == true || e["retryable"] != false {
			t.Errorf("call %d: the model got %v, want %s %q without side effects", i, r.Response, want.typ, want.msg)
		}
	}
}
