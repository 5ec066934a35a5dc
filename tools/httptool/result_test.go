package httptool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/httptool"
)

// orderAnswer is a large order, most of which the model does not need.
var orderAnswer = `{"id": "A-1234", "status": "shipped", "customer": {"name": "Ada", "email": "ada@example.com"},
  "items": [{"sku": "G-1", "name": "Grinder"}, {"sku": "B-2", "name": "Beans"}], "a/b": 1, "m~n": 2,
  "audit": "` + strings.Repeat("x", 50000) + `"}`

// resultTool loads a lookup_order tool whose http.result is pointers.
func resultTool(t *testing.T, url, pointers string) (*tools.Tool, error) {
	t.Helper()
	schema := `{"name": "lookup_order", "category": "retrieval", "modes": ["text"], "redact": {"args": [], "result": []},
  "http": {"url": "` + url + `", "method": "GET", "result": ` + pointers + `},
  "parameters": {"type": "object", "properties": {}}}`
	reg, err := httptool.Load(fstest.MapFS{"lookup_order/schema.json": {Data: []byte(schema)},
		"lookup_order/guide.md": {Data: []byte("Look up an order.\n")}}, "test dir", httptool.Options{})
	if err != nil {
		return nil, err
	}
	tool, _ := reg.Lookup("lookup_order")
	return tool, nil
}

func TestHTTPResultGivesTheModelOnlyTheNamedFields(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, orderAnswer)
	}))
	defer srv.Close()
	tool, err := resultTool(t, srv.URL+"/orders/1", `["/status", "/customer/name", "/items/1/sku", "/a~1b", "/m~0n", "/missing", "/items/7", "/items/01"]`)
	if err != nil {
		t.Fatal(err)
	}
	env := call(t, tool, `{}`)
	if !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	b, _ := json.Marshal(env.Data)
	if string(b) != `{"/a~1b":1,"/customer/name":"Ada","/items/1/sku":"B-2","/m~0n":2,"/status":"shipped"}` {
		t.Errorf("the model would get %s", b)
	}
}

func TestHTTPResultOfANonObjectAnswerHoldsOnlyWhatResolves(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `plain text`)
	}))
	defer srv.Close()
	tool, err := resultTool(t, srv.URL, `["/status", ""]`)
	if err != nil {
		t.Fatal(err)
	}
	env := call(t, tool, `{}`)
	if b, _ := json.Marshal(env.Data); !env.OK || string(b) != `{"":"plain text"}` {
		t.Errorf("envelope %+v (%s)", env, b)
	}
}

func TestHTTPResultThatIsNotAJSONPointerIsRefusedAtLoad(t *testing.T) {
	for _, bad := range []string{`["status"]`, `["/a~2"]`, `[]`, `["/x", "/x"]`} {
		_, err := resultTool(t, "https://api.example/orders", bad)
		if err == nil || !strings.Contains(err.Error(), "lookup_order") || !strings.Contains(err.Error(), "result") {
			t.Errorf("http.result %s: load error %v, want one naming the tool and http.result", bad, err)
		}
	}
}
