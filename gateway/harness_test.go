package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
)

func TestMain(m *testing.M) {
	mcptest.ServeStdioIfAsked() // this binary is also the stdio MCP server of the MCP tests
	redis.SetLogger(redisLogger{slog.New(slog.NewTextHandler(io.Discard, nil))})
	// genai (through opencensus) and bleve start workers when their packages
	// load; they are not ours and live as long as the process.
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
		goleak.Cleanup(func(code int) {
			if binaryDir != "" {
				_ = os.RemoveAll(binaryDir)
			}
			os.Exit(code)
		}))
}

// testGateway is a whole gateway, wired and served exactly as the binary
// wires and serves it (both listeners, on free loopback ports), with the
// offline fake model driven by brain.
type testGateway struct {
	t        testing.TB
	url      string // the public listener
	adminURL string // the admin listener: /metrics, /metrics/summary
	reg      *prometheus.Registry
	gw       *gateway
	cfg      Config
	stop     func()      // drains and stops it; the test's cleanup calls it too
	errors   *errorLines // the gateway's ERROR log lines
}

func defaultTestConfig(t testing.TB) Config {
	t.Helper()
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	cfg, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ShutdownTimeout = 2 * time.Second
	// Tests stream microphone audio faster than real time; the pacing
	// test turns the pace on.
	cfg.MicPace = 0
	return cfg
}

func startGateway(t testing.TB, cfg Config, brain fakegemini.Brain) *testGateway {
	t.Helper()
	return startGatewayWith(t, cfg, brains{text: brain})
}

// startGatewayWith starts a gateway whose fake Gemini runs the given brains
// (nil: the demo brains).
func startGatewayWith(t testing.TB, cfg Config, b brains) *testGateway {
	t.Helper()
	return startGatewayLogging(t, cfg, b, nil)
}

// startGatewayLogging is startGatewayWith whose whole log, at debug level,
// also goes to logTo (nil: nowhere but the verbose test output).
func startGatewayLogging(t testing.TB, cfg Config, b brains, logTo io.Writer) *testGateway {
	t.Helper()
	reg := prometheus.NewRegistry()
	var h slog.Handler = slog.NewTextHandler(io.Discard, nil)
	switch {
	case logTo != nil && testing.Verbose():
		h = slog.NewJSONHandler(io.MultiWriter(logTo, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug})
	case logTo != nil:
		h = slog.NewJSONHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug})
	case testing.Verbose():
		h = slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	if cfg.Addr == "" || cfg.Addr == "127.0.0.1:8080" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.AdminAddr == "" || cfg.AdminAddr == "127.0.0.1:9090" {
		cfg.AdminAddr = "127.0.0.1:0"
	}
	errs := &errorLines{}
	log := slog.New(errorRecorder{Handler: h, lines: errs})
	gw, err := assemble(context.Background(), cfg, reg, log, b)
	if err != nil {
		t.Fatalf("assemble: %v", err)
	}
	if gw.fake != nil {
		// Every request the gateway makes is checked against what the real
		// service accepts.
		fakegemini.Strict(t, gw.fake)
	}
	l, err := listen(cfg, gw, log)
	if err != nil {
		gw.close()
		t.Fatalf("listen: %v", err)
	}
	tg := &testGateway{t: t, url: l.scheme + "://" + l.publicAddr.String(), adminURL: l.scheme + "://" + l.adminAddr.String(),
		reg: reg, gw: gw, cfg: cfg, errors: errs}
	var once sync.Once
	tg.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			gw.sessions.Drain(ctx)
			l.shutdown(ctx, log)
			gw.close()
		})
	}
	t.Cleanup(tg.stop)
	return tg
}

// errorLines are the messages of the ERROR log lines a gateway wrote.
type errorLines struct {
	mu    sync.Mutex
	lines []string
}

func (e *errorLines) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

// errorRecorder passes records on to Handler and notes the ERROR ones.
type errorRecorder struct {
	slog.Handler
	lines *errorLines
}

func (r errorRecorder) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || r.Handler.Enabled(ctx, l)
}

func (r errorRecorder) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelError {
		r.lines.mu.Lock()
		r.lines.lines = append(r.lines.lines, rec.Message)
		r.lines.mu.Unlock()
	}
	if !r.Handler.Enabled(ctx, rec.Level) {
		return nil
	}
	return r.Handler.Handle(ctx, rec)
}

func (r errorRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return errorRecorder{Handler: r.Handler.WithAttrs(as), lines: r.lines}
}

func (r errorRecorder) WithGroup(name string) slog.Handler {
	return errorRecorder{Handler: r.Handler.WithGroup(name), lines: r.lines}
}

// counterSum is the sum of a counter family over all its label values (0
// when it has none yet).
func (g *testGateway) counterSum(name string) float64 {
	g.t.Helper()
	return counterSum(g.t, g.reg, name)
}

// counterSum adds up every series of a counter in reg.
func counterSum(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// refusals is turnstile_refusals_total for one reason, over every channel.
func (g *testGateway) refusals(reason string) float64 {
	var sum float64
	for _, ch := range append(slices.Clone(metrics.Channels), metrics.ChannelNone) {
		sum += testutil.ToFloat64(g.gw.sessions.Metrics.Refusals.WithLabelValues(reason, ch.String()))
	}
	return sum
}

// waitRefusals waits until refusals(reason) is want: a refusal that closes
// the connection is counted once the close has gone out, so a test that saw
// the close may read the counter an instant early.
func (g *testGateway) waitRefusals(t testing.TB, reason string, want float64) {
	t.Helper()
	testwait.ForNil(t, "refusals{"+reason+"} to reach the expected count", func() error {
		if n := g.refusals(reason); n != want {
			return fmt.Errorf("refusals{%s} = %v, want %v", reason, n, want)
		}
		return nil
	})
}

// sessionsRefused is turnstile_sessions_refused_total for one reason, over
// every channel.
func (g *testGateway) sessionsRefused(reason string) float64 {
	var sum float64
	for _, ch := range metrics.Channels {
		sum += testutil.ToFloat64(g.gw.sessions.Metrics.SessionsRefused.WithLabelValues(reason, ch.String()))
	}
	return sum
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// wsClient is a browser stand-in speaking protocol v1.
type wsClient struct {
	t testing.TB
	c *websocket.Conn
}

type event map[string]any

func (e event) typ() string { s, _ := e["type"].(string); return s }
func (e event) str(k string) string {
	s, _ := e[k].(string)
	return s
}

func (g *testGateway) dial(query string, header http.Header) *wsClient {
	g.t.Helper()
	c, err := g.tryDial(query, header)
	if err != nil {
		g.t.Fatalf("dial: %v", err)
	}
	return c
}

func (g *testGateway) tryDial(query string, header http.Header) (*wsClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/ws" + query
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"turnstile.v1"}, HTTPHeader: header})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	cl := &wsClient{t: g.t, c: c}
	g.t.Cleanup(func() { _ = c.CloseNow() })
	return cl, nil
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

func (c *wsClient) sendRaw(b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads one event, failing the test after 10 s.
func (c *wsClient) next() event {
	c.t.Helper()
	ev, err := c.read()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return ev
}

func (c *wsClient) read() (event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	var ev event
	if err := json.Unmarshal(b, &ev); err != nil {
		c.t.Fatalf("gateway sent invalid JSON %q: %v", b, err)
	}
	return ev, nil
}

// until reads events up to and including the first of type typ.
func (c *wsClient) until(typ string) []event {
	c.t.Helper()
	var evs []event
	for {
		ev := c.next()
		evs = append(evs, ev)
		if ev.typ() == typ {
			return evs
		}
	}
}

// start sends session.start and returns session.ready.
func (c *wsClient) start(msg map[string]any) event {
	c.t.Helper()
	if msg == nil {
		msg = map[string]any{}
	}
	msg["type"] = "session.start"
	c.send(msg)
	ev := c.next()
	if ev.typ() != "session.ready" {
		c.t.Fatalf("first event = %v, want session.ready", ev)
	}
	return ev
}

// ask sends a user message and returns the turn's events up to turn.done.
func (c *wsClient) ask(text string) []event {
	c.t.Helper()
	c.send(map[string]any{"type": "text", "text": text})
	return c.until("turn.done")
}

// expectClose reads until the connection closes and returns its code.
func (c *wsClient) expectClose() websocket.StatusCode {
	c.t.Helper()
	for {
		if _, err := c.read(); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

func ofType(evs []event, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.typ() == typ {
			out = append(out, e)
		}
	}
	return out
}

func last(evs []event) event { return evs[len(evs)-1] }

// Helpers of the pipeline tests (policy, confirm and block tests).

// withPolicy loads a policy file written from yaml into cfg, as
// TURNSTILE_POLICY would.
func withPolicy(t *testing.T, cfg Config, yaml string) Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := tools.LoadPolicy(path)
	if err != nil {
		t.Fatalf("load policy: %v", err)
	}
	cfg.Policy, cfg.PolicyFile = p, path
	return cfg
}

// errorType is a tool.result's error type, "" when it has none.
func errorType(ev event) string {
	e, _ := ev["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

// refusedWith reports whether a tool.result says the gateway refused the
// call with the error type want, without running it.
func refusedWith(ev event, want string) bool {
	return ev["ok"] == false && ev["refused"] == true && errorType(ev) == want
}

// resultsByID indexes a turn's tool.result events by call id: refused calls
// are reported as soon as they are refused, so their order may differ from
// the calls' order.
func resultsByID(evs []event) map[string]event {
	out := map[string]event{}
	for _, r := range ofType(evs, "tool.result") {
		out[r.str("id")] = r
	}
	return out
}

// resultsInCallOrder are a turn's tool.result events in the order of their
// tool.call events, which is the order the model made the calls in.
func resultsInCallOrder(evs []event) []event {
	byID := resultsByID(evs)
	var out []event
	for _, c := range ofType(evs, "tool.call") {
		out = append(out, byID[c.str("id")])
	}
	return out
}

// lastResponses are the function responses the model received in a
// request: the parts of its last content.
func lastResponses(t *testing.T, req *fakegemini.Request) []*genai.FunctionResponse {
	t.Helper()
	var out []*genai.FunctionResponse
	for _, p := range req.Contents[len(req.Contents)-1].Parts {
		if p.FunctionResponse != nil {
			out = append(out, p.FunctionResponse)
		}
	}
	return out
}

// responseError is the error type and message of a function response, ""
// when the call succeeded.
func responseError(r *genai.FunctionResponse) (typ, msg string) {
	e, _ := r.Response["error"].(map[string]any)
	typ, _ = e["type"].(string)
	msg, _ = e["message"].(string)
	return typ, msg
}

func searchCall(query string) fakegemini.Call {
	return fakegemini.Call{Name: "kb_search", Args: map[string]any{"query": query}}
}

func getCall(id string) fakegemini.Call {
	return fakegemini.Call{Name: "kb_get", Args: map[string]any{"id": id}}
}

func callStep(cs ...fakegemini.Call) func(*fakegemini.Request) fakegemini.Reply {
	return fakegemini.Fixed(fakegemini.CallReply(cs...))
}

func textStep(text string) func(*fakegemini.Request) fakegemini.Reply {
	return fakegemini.Fixed(fakegemini.TextReply(text, 1))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func systemText(req *fakegemini.Request) string {
	var b strings.Builder
	for _, p := range req.SystemInstruction.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// redisClientFor is a client of the gateway's Redis, for looking at what
// it stored.
func redisClientFor(t testing.TB, cfg Config) redis.UniversalClient {
	t.Helper()
	rdb, err := store.NewRedisClient(string(cfg.RedisURL), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
