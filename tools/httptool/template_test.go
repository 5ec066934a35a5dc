package httptool_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/httptool"
)

// orderTool is a get_order manifest whose URL is template.
func orderTool(t *testing.T, template, method string) *tools.Tool {
	t.Helper()
	schema := `{
  "name": "get_order", "category": "retrieval", "modes": ["text"],
  "redact": {"args": [], "result": []},
  "http": {"url": "` + template + `", "method": "` + method + `"},
  "parameters": {"type": "object", "properties": {"order_id": {"type": ["string", "integer"]}, "line": {"type": "integer"},
    "note": {"type": "string"}}, "additionalProperties": false}
}`
	reg, err := httptool.Load(fstest.MapFS{"get_order/schema.json": {Data: []byte(schema)},
		"get_order/guide.md": {Data: []byte("Get an order.\n")}}, "test dir", httptool.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	tool, _ := reg.Lookup("get_order")
	return tool
}

// rawRecorder records each request's path as sent (escapes kept), query
// and body.
func rawRecorder(t *testing.T) (*httptest.Server, chan [3]string) {
	t.Helper()
	got := make(chan [3]string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- [3]string{r.URL.EscapedPath(), r.URL.RawQuery, string(b)}
		_, _ = io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestURLTemplateIsFilledEscapedAndTheUsedArgumentsLeaveTheBody(t *testing.T) {
	srv, got := rawRecorder(t)
	tool := orderTool(t, srv.URL+"/orders/{order_id}/lines/{line}", "POST")
	if env := call(t, tool, `{"order_id": "A-1234", "line": 2, "note": "late"}`); !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	if r := <-got; r[0] != "/orders/A-1234/lines/2" || r[2] != `{"note":"late"}` {
		t.Errorf("the service saw path %q body %q, want /orders/A-1234/lines/2 and only note in the body", r[0], r[2])
	}
	// A slash or dots in an argument stay inside its segment.
	if env := call(t, tool, `{"order_id": "../admin/x?y#z", "line": 1}`); !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	if r := <-got; r[0] != "/orders/..%2Fadmin%2Fx%3Fy%23z/lines/1" || r[1] != "" || r[2] != `{}` {
		t.Errorf("the service saw path %q query %q body %q", r[0], r[1], r[2])
	}
}

func TestURLTemplateOfAGetLeavesTheUsedArgumentsOutOfTheQuery(t *testing.T) {
	srv, got := rawRecorder(t)
	tool := orderTool(t, srv.URL+"/orders/{order_id}?expand=lines", "GET")
	if env := call(t, tool, `{"order_id": 77, "note": "a b"}`); !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	if r := <-got; r[0] != "/orders/77" || r[1] != "expand=lines&note=a+b" {
		t.Errorf("the service saw path %q query %q", r[0], r[1])
	}
}

func TestURLTemplateRefusesAMissingOrUnsafeArgumentBeforeSending(t *testing.T) {
	srv, got := rawRecorder(t)
	tool := orderTool(t, srv.URL+"/orders/{order_id}", "POST")
	for args, want := range map[string]string{
		`{"note": "x"}`:      "the URL needs the argument order_id",
		`{"order_id": ".."}`: `may not be empty, "." or ".."`,
		`{"order_id": "."}`:  `may not be empty, "." or ".."`,
		`{"order_id": ""}`:   `may not be empty, "." or ".."`,
	} {
		env := call(t, tool, args)
		if env.OK || env.Error.Type != tools.ErrValidation || !strings.Contains(env.Error.Message, want) || env.Error.PartialSideEffects {
			t.Errorf("%s: envelope %+v, want VALIDATION %q", args, env.Error, want)
		}
	}
	select {
	case r := <-got:
		t.Errorf("a refused call reached the service: %v", r)
	default:
	}
}

func TestManifestWhoseURLNamesAnUndeclaredParameterIsRefusedAtLoad(t *testing.T) {
	for template, want := range map[string]string{
		"https://api.example/orders/{order}":       `get_order`,
		"https://{order_id}.example/orders":        "not in the host",
		"https://api.example/orders?id={order_id}": "not in the query",
		"https://api.example/orders/{Order-Id}":    "is not a placeholder",
		"https://api.example/orders/{order_id":     "unmatched",
	} {
		schema := `{"name": "get_order", "category": "retrieval", "modes": ["text"], "redact": {"args": [], "result": []},
  "http": {"url": "` + template + `"},
  "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}`
		_, err := httptool.Load(fstest.MapFS{"get_order/schema.json": {Data: []byte(schema)},
			"get_order/guide.md": {Data: []byte("Get an order.\n")}}, "test dir", httptool.Options{})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "get_order") {
			t.Errorf("%s: load error %v, want one naming the tool and saying %q", template, err, want)
		}
	}
}

func TestManifestWithAURLTemplateOfDeclaredParametersLoads(t *testing.T) {
	tool := orderTool(t, "https://api.example/orders/{order_id}/lines/{line}", "GET")
	if tool == nil || tool.HTTP.URL != "https://api.example/orders/{order_id}/lines/{line}" {
		t.Fatalf("tool %+v", tool)
	}
}
