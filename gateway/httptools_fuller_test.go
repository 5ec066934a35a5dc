package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

// lookupOrderSchema is an HTTP tool with a URL template and http.result.
const lookupOrderSchema = `{
  "name": "lookup_order", "category": "retrieval", "modes": ["text"],
  "redact": {"args": ["order_id"], "result": ["/status"]},
  "http": {"url": "%s/orders/{order_id}", "method": "GET", "result": ["/status", "/eta"]},
  "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "fields": {"type": "string"}},
    "required": ["order_id"], "additionalProperties": false}
}`

func TestHTTPToolURLTemplateAndResultThroughTheBrowserProtocol(t *testing.T) {
	seen := make(chan string, 4)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.EscapedPath() + "?" + r.URL.RawQuery
		_, _ = io.WriteString(w, `{"status": "shipped", "eta": "2026-12-01", "internal": {"warehouse": "W-9", "notes": "`+
			strings.Repeat("n", 20000)+`"}}`)
	}))
	defer svc.Close()
	dir := toolsDir(t, map[string]string{"lookup_order": strings.Replace(lookupOrderSchema, "%s", svc.URL, 1)})
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": dir})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "lookup_order", Args: map[string]any{"order_id": "A/1234", "fields": "all"}}), textStep("It has shipped."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("where is my order A/1234?")
	res := ofType(evs, "tool.result")
	if len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("tool.result %v", evs)
	}
	if got := <-seen; got != "/orders/A%2F1234?fields=all" {
		t.Errorf("the service was asked %q, want the order id escaped in the path and only fields in the query", got)
	}
	out, _ := lastResponses(t, brain.Requests()[1])[0].Response["output"].(map[string]any)
	if len(out) != 2 || out["/status"] != "shipped" || out["/eta"] != "2026-12-01" {
		t.Errorf("the model got %v, want only /status and /eta", lastResponses(t, brain.Requests()[1])[0].Response)
	}
}
