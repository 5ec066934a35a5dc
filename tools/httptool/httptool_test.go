package httptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/httptool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// manifest is a create_ticket schema.json with the given http block.
func manifest(httpBlock string) string {
	return `{
  "name": "create_ticket",
  "category": "action",
  "modes": ["text"],
  "requiresConfirmation": true,
  "redact": {"args": ["title"], "result": ["id"]},
  "http": ` + httpBlock + `,
  "parameters": {
    "type": "object",
    "properties": {"title": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}, "priority": {"type": "integer"}},
    "required": ["title"],
    "additionalProperties": false
  }
}`
}

func folder(schema string) fstest.MapFS {
	return fstest.MapFS{
		"create_ticket/schema.json": {Data: []byte(schema)},
		"create_ticket/guide.md":    {Data: []byte("# create_ticket\n\nOpen a support ticket.\n")},
	}
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// load loads the one tool and returns it.
func load(t *testing.T, schema string, opts httptool.Options) *tools.Tool {
	t.Helper()
	reg, err := httptool.Load(folder(schema), "test dir", opts)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	tool, ok := reg.Lookup("create_ticket")
	if !ok {
		t.Fatal("create_ticket not loaded")
	}
	return tool
}

func call(t *testing.T, tool *tools.Tool, args string) tools.Envelope {
	t.Helper()
	if err := tool.ValidateArgs(json.RawMessage(args)); err != nil {
		t.Fatalf("args %s: %v", args, err)
	}
	return tool.Handler.Handle(context.Background(), tools.Call{ID: "c1", Args: json.RawMessage(args)})
}

type seen struct {
	method, path, query, auth, tenant, contentType, body string
}

func recorder(t testing.TB, status int, contentType, answer string) (*httptest.Server, chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select { // the first requests are kept; a benchmark makes many more
		case got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Tenant"),
			r.Header.Get("Content-Type"), string(b)}:
		default:
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestPostsArgumentsWithExpandedHeadersAndReturnsTheJSONAnswer(t *testing.T) {
	srv, got := recorder(t, http.StatusCreated, "application/json", `{"id": "T-1001", "url": "https://t/1001", "big": 12345678901234567890}`)
	tool := load(t, manifest(`{"url": "`+srv.URL+`/tickets", "headers": {"Authorization": "Bearer ${TICKETS_API_KEY}", "X-Tenant": "acme-${REGION}"}}`),
		httptool.Options{LookupEnv: env(map[string]string{"TICKETS_API_KEY": "s3cret", "REGION": "eu"})})

	env := call(t, tool, `{"title": "Broken grinder", "tags": ["hw"]}`)
	if !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	data := env.Data.(map[string]any)
	if data["id"] != "T-1001" || fmt.Sprint(data["big"]) != "12345678901234567890" {
		t.Errorf("data = %v, want the service's JSON (big integers exact)", data)
	}
	r := <-got
	if r.method != http.MethodPost || r.path != "/tickets" || r.auth != "Bearer s3cret" || r.tenant != "acme-eu" ||
		r.contentType != "application/json" || r.body != `{"title": "Broken grinder", "tags": ["hw"]}` {
		t.Errorf("the service saw %+v", r)
	}
	// The manifest keeps the reference, never the secret.
	if b, _ := json.Marshal(tool.Manifest); strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "${TICKETS_API_KEY}") {
		t.Errorf("manifest = %s", b)
	}
}

func TestGetSendsArgumentsAsQueryParameters(t *testing.T) {
	srv, got := recorder(t, http.StatusOK, "", `[1, 2]`)
	tool := load(t, manifest(`{"url": "`+srv.URL+`/search?fixed=1", "method": "GET"}`), httptool.Options{})
	env := call(t, tool, `{"title": "a b", "tags": ["x", "y"], "priority": 2}`)
	if !env.OK || fmt.Sprint(env.Data) != "[1 2]" {
		t.Fatalf("envelope %+v", env)
	}
	r := <-got
	if r.method != http.MethodGet || r.body != "" || r.query != "fixed=1&priority=2&tags=x&tags=y&title=a+b" {
		t.Errorf("the service saw %+v", r)
	}
}

func TestAnswersThatAreNotJSON(t *testing.T) {
	for _, c := range []struct {
		answer string
		want   any
	}{{"", nil}, {"created", "created"}, {"  \n", nil}} {
		srv, _ := recorder(t, http.StatusOK, "text/plain", c.answer)
		tool := load(t, manifest(`{"url": "`+srv.URL+`"}`), httptool.Options{})
		if env := call(t, tool, `{"title": "x"}`); !env.OK || env.Data != c.want {
			t.Errorf("answer %q: envelope %+v, want data %v", c.answer, env, c.want)
		}
	}
}

func TestErrorStatusesMapToErrorTypes(t *testing.T) {
	cases := []struct {
		status             int
		typ                tools.ErrorType
		retryable, partial bool
	}{
		{400, tools.ErrValidation, false, false},
		{422, tools.ErrValidation, false, false},
		{401, tools.ErrAuth, false, false},
		{403, tools.ErrAuth, false, false},
		{404, tools.ErrNotFound, false, false},
		{408, tools.ErrTimeout, true, true},
		{504, tools.ErrTimeout, true, true},
		{429, tools.ErrRateLimit, true, false},
		{500, tools.ErrTransient, true, true},
		{502, tools.ErrTransient, true, true},
		{503, tools.ErrTransient, true, true},
		{409, tools.ErrPermanent, false, false},
		{410, tools.ErrPermanent, false, false},
		{302, tools.ErrPermanent, false, false},
	}
	for _, c := range cases {
		srv, _ := recorder(t, c.status, "application/json", `{"error": {"message": "queue \"hw\" is closed"}}`)
		tool := load(t, manifest(`{"url": "`+srv.URL+`"}`), httptool.Options{})
		env := call(t, tool, `{"title": "x"}`)
		want := fmt.Sprintf("the service answered HTTP %d %s: queue \"hw\" is closed", c.status, http.StatusText(c.status))
		if env.OK || env.Error.Type != c.typ || env.Error.Retryable != c.retryable ||
			env.Error.PartialSideEffects != c.partial || env.Error.Message != want {
			t.Errorf("HTTP %d: %+v, want %s retryable=%v partial=%v %q", c.status, env.Error, c.typ, c.retryable, c.partial, want)
		}
	}
}

func TestErrorMessagesAreFoundAndBounded(t *testing.T) {
	long := strings.Repeat("é", 500)
	cases := []struct{ contentType, body, want string }{
		{"application/json", `{"message": "title too short"}`, ": title too short"},
		{"application/json", `{"error": "invalid_token"}`, ": invalid_token"},
		{"application/problem+json", `{"title": "Bad", "detail": "priority must be 1-5"}`, ": priority must be 1-5"},
		{"application/json", `{"message": "` + long + `"}`, ": " + strings.Repeat("é", 300) + "…"},
		{"text/plain; charset=utf-8", "line one\nline two", ": line one line two"},
		{"text/html", "<html>oops</html>", ""},
		{"application/json", `{"code": 7}`, ""},
	}
	for _, c := range cases {
		srv, _ := recorder(t, 400, c.contentType, c.body)
		tool := load(t, manifest(`{"url": "`+srv.URL+`"}`), httptool.Options{})
		env := call(t, tool, `{"title": "x"}`)
		if want := "the service answered HTTP 400 Bad Request" + c.want; env.Error == nil || env.Error.Message != want {
			t.Errorf("%s %q: %+v, want %q", c.contentType, c.body, env.Error, want)
		}
	}
}

func TestLoadRefusesMissingVariablesAndFoldersWithoutHTTP(t *testing.T) {
	_, err := httptool.Load(folder(manifest(`{"url": "https://t.example/x", "headers": {"Authorization": "Bearer ${TICKETS_API_KEY}", "X-A": "${1BAD}", "X-B": "${EMPTY}"}}`)),
		"dir", httptool.Options{LookupEnv: env(map[string]string{"EMPTY": ""})})
	var le *tools.LoadError
	if !errors.As(err, &le) || le.Tool != "create_ticket" || le.File != "schema.json" {
		t.Fatalf("err = %v, want a LoadError for create_ticket's schema.json", err)
	}
	for _, want := range []string{"http.headers.Authorization: environment variable TICKETS_API_KEY is not set",
		`http.headers.X-A: "${1BAD}" is not a valid reference`, "http.headers.X-B: environment variable EMPTY is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	noHTTP := strings.Replace(manifest(`{"url": "https://x"}`), `"http": {"url": "https://x"},`, "", 1)
	if _, err := httptool.Load(folder(noHTTP), "dir", httptool.Options{}); err == nil || !strings.Contains(err.Error(), `no "http" block`) {
		t.Errorf("folder without http block: %v", err)
	}

	for block, want := range map[string]string{
		`{"url": "ftp://x/y"}`:                                "http/url",
		`{"url": "https://user:pw@x/y"}`:                      "must not hold credentials",
		`{"url": "https://x", "method": "TRACE"}`:             "http/method",
		`{"url": "https://x", "headers": {"Host": "evil"}}`:   "http.headers: Host is set by the gateway",
		`{"url": "https://x", "headers": {"X-A": "a\nb"}}`:    "http/headers/X-A",
		`{"url": "https://x", "timeout": 5}`:                  "additional properties 'timeout'",
		`{"method": "POST"}`:                                  "missing property 'url'",
		`{"url": "https://x", "headers": {"Bad Name": "v"}}`:  `http.headers: "Bad Name" is not a valid header name`,
		`{"url": "https://x", "headers": {"X-N": 5}}`:         "http/headers/X-N",
		`{"url": "https://x", "headers": {"X-T": "${OPEN"}}`:  "unterminated",
		`{"url": "https://x", "headers": {"X-T": "${}"}}`:     "not a valid reference",
		`{"url": "https://x", "headers": {"X-T": "$5 flat"}}`: "",
	} {
		_, err := httptool.Load(folder(manifest(block)), "dir", httptool.Options{})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", block, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: err = %v, want it to mention %q", block, err, want)
		}
	}
}

func TestUnreachableServiceAndCancelledCalls(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	tool := load(t, manifest(`{"url": "`+addr+`"}`), httptool.Options{})
	env := call(t, tool, `{"title": "x"}`)
	if env.OK || env.Error.Type != tools.ErrTransient || !env.Error.Retryable || env.Error.PartialSideEffects {
		t.Errorf("unreachable service: %+v", env.Error)
	}

	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	tool = load(t, manifest(`{"url": "`+hang.URL+`"}`), httptool.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	env = tool.Handler.Handle(ctx, tools.Call{Args: json.RawMessage(`{"title": "x"}`)})
	if env.OK || env.Error.Type != tools.ErrTimeout || !env.Error.PartialSideEffects {
		t.Errorf("hanging service: %+v", env.Error)
	}
}

func TestOversizedAnswerIsNotRead(t *testing.T) {
	srv, _ := recorder(t, http.StatusOK, "application/json", `"`+strings.Repeat("x", 2000)+`"`)
	tool := load(t, manifest(`{"url": "`+srv.URL+`"}`), httptool.Options{MaxResponseBytes: 1000})
	env := call(t, tool, `{"title": "x"}`)
	if env.OK || env.Error.Type != tools.ErrPermanent || env.Error.Retryable || !env.Error.PartialSideEffects {
		t.Errorf("oversized answer: %+v", env.Error)
	}
}
