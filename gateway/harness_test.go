package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/cli"
	"github.com/turnstile-gw/turnstile/internal/gatewaytest"
	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

func TestMain(m *testing.M) {
	mcptest.ServeStdioIfAsked() // this binary is also the stdio MCP server of the MCP tests
	redis.SetLogger(silentRedis{})
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
// offline fake model driven by brain: an internal/gatewaytest gateway, seen
// through the names these tests were written with.
type testGateway struct {
	t        testing.TB
	url      string // the public listener
	adminURL string // the admin listener: /metrics, /metrics/summary
	reg      *prometheus.Registry
	gw       *parts
	cfg      gateway.Config
	stop     func()     // drains and stops it; the test's cleanup calls it too
	errors   errorLines // the gateway's ERROR log lines
}

// parts are the pieces of a gateway the tests look at.
type parts struct {
	sessions    *session.Manager
	edge        *server.Server
	catalog     *tools.Catalog
	fake        *fakegemini.Server
	tracing     *tracing.Provider
	toolsReload *reloader
	close       func()
}

func partsOf(gw *gateway.Gateway) *parts {
	return &parts{sessions: gw.Sessions(), edge: gw.Edge(), catalog: gw.Tools(), fake: gw.OfflineModel(),
		tracing: gw.Tracing(), toolsReload: &reloader{gw: gw}, close: gw.Close}
}

// reloader reloads a gateway's tools folder, as SIGHUP does.
type reloader struct{ gw *gateway.Gateway }

func (r *reloader) reload() (metrics.ToolsReloadOutcome, error) { return r.gw.ReloadTools() }

// watchReloads reloads r's tools folder at each signal on hup until ctx
// ends, as the binary does on SIGHUP.
func watchReloads(ctx context.Context, r *reloader, hup <-chan os.Signal) {
	gateway.WatchReloads(ctx, r.gw, hup)
}

// errorLines are the messages of the ERROR log lines a gateway wrote.
type errorLines struct{ g *gatewaytest.Gateway }

func (e errorLines) all() []string { return e.g.Errors() }

// brains replace the offline demo model's brains; zero values mean the
// demo brains.
type brains struct {
	text        fakegemini.Brain
	live        fakegemini.LiveBrain
	openai      fakeopenai.Brain
	tools       []*tools.Tool
	credentials *auth.Credentials
}

// options are the gateway's options that carry the brains.
func (b brains) options() gateway.Options {
	return gateway.Options{TextBrain: b.text, LiveBrain: b.live, OpenAIBrain: b.openai, Tools: b.tools,
		Credentials: b.credentials}
}

func defaultTestConfig(t testing.TB) gateway.Config {
	t.Helper()
	return gatewaytest.Config(t)
}

func startGateway(t testing.TB, cfg gateway.Config, brain fakegemini.Brain) *testGateway {
	t.Helper()
	return startGatewayWith(t, cfg, brains{text: brain})
}

// startGatewayWith starts a gateway whose fake Gemini runs the given brains
// (nil: the demo brains).
func startGatewayWith(t testing.TB, cfg gateway.Config, b brains) *testGateway {
	t.Helper()
	return startGatewayLogging(t, cfg, b, nil)
}

// startGatewayLogging is startGatewayWith whose whole log, at debug level,
// also goes to logTo (nil: nowhere but the verbose test output).
func startGatewayLogging(t testing.TB, cfg gateway.Config, b brains, logTo io.Writer) *testGateway {
	t.Helper()
	g := gatewaytest.Start(t, cfg, gatewaytest.Options{Options: b.options(), LogTo: logTo})
	return &testGateway{t: t, url: g.URL, adminURL: g.AdminURL, reg: g.Registry(), gw: partsOf(g.Gateway),
		cfg: g.Config(), stop: g.Stop, errors: errorLines{g}}
}

// assemble builds a gateway without serving it, as the binary does before
// it listens.
func assemble(ctx context.Context, cfg gateway.Config, reg *prometheus.Registry, log *slog.Logger, b brains) (*parts, error) {
	opts := b.options()
	opts.Log, opts.Registry = log, reg
	gw, err := gateway.New(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	return partsOf(gw), nil
}

// serve runs the gateway as the binary does, until ctx ends.
func serve(ctx context.Context, cfg gateway.Config, log *slog.Logger, reload <-chan os.Signal) error {
	gw, err := gateway.New(ctx, cfg, gateway.Options{Log: log, Reload: reload})
	if err != nil {
		return err
	}
	return gw.Serve(ctx)
}

// realMain is the binary's command line.
func realMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return gateway.Main(args, getenv, stdout, stderr)
}

// toolsCommand is `gateway tools ARGS`.
func toolsCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return gateway.Main(append([]string{"tools"}, args...), getenv, stdout, stderr)
}

// The configuration tests' helpers, and pieces some tests check on their
// own (export_test.go).
var (
	configEnv        = gateway.ConfigEnv
	loadTestConfig   = gateway.LoadTestConfig
	loadConfig       = gateway.LoadConfigTo
	buildVersion     = gateway.BuildVersion
	resolveVersion   = gateway.ResolveVersion
	redisDurability  = gateway.RedisDurability
	redisRefusal     = gateway.RedisRefusal
	toolNames        = gateway.ToolNames
	commit           = gateway.Commit
	redisCheckScript = gateway.RedisCheckScript
)

const (
	vertexScope        = gateway.VertexScope
	redisACLCategories = gateway.RedisACLCategories
	redisCheckKey      = gateway.RedisCheckKey
)

// configSettings are the gateway's settings, by variable.
func configSettings() []struct{ env string } {
	var out []struct{ env string }
	for _, e := range gateway.SettingEnvs() {
		out = append(out, struct{ env string }{e})
	}
	return out
}

// renderProblems are the tools of reg that cannot be rendered.
func renderProblems(reg *tools.Registry) []struct{ err error } {
	var out []struct{ err error }
	for _, e := range gateway.RenderProblems(reg) {
		out = append(out, struct{ err error }{e})
	}
	return out
}

// readWAV reads a PCM16 mono WAV file.
func readWAV(r io.Reader) (struct {
	pcm  []byte
	rate int
}, error) {
	pcm, rate, err := cli.ReadWAV(r)
	return struct {
		pcm  []byte
		rate int
	}{pcm, rate}, err
}

// silentRedis keeps go-redis's own log lines out of the test output.
type silentRedis struct{}

func (silentRedis) Printf(context.Context, string, ...any) {}

// counterSum is the sum of a counter family over all its label values (0
// when it has none yet).
func (g *testGateway) counterSum(name string) float64 {
	g.t.Helper()
	return counterSum(g.t, g.reg, name)
}

// gauge is the value of a gauge (summed over its series; 0 when absent).
func (g *testGateway) gauge(name string) float64 {
	g.t.Helper()
	return seriesSum(g.t, g.reg, name, "", "")
}

// counterSum adds up every series of a counter in reg.
func counterSum(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return seriesSum(t, reg, name, "", "")
}

// seriesSum adds up the series of the counter or gauge name in reg whose
// label is value (every series when label is ""); of a histogram, their
// observation counts.
func seriesSum(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
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
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == label && l.GetValue() == value
			}) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// cancelledModelRequests is how many model requests this gateway started
// and then cancelled (a take-over, the user's cancel, the session's end).
// A turn Redis refuses (a block or the turns per minute reached on another
// node, the storage quota) sends no request and counts none: its request
// is built alongside the turn's first Redis write and sent only once
// admitted.
func (g *testGateway) cancelledModelRequests() float64 {
	g.t.Helper()
	return seriesSum(g.t, g.reg, "turnstile_model_requests_total", "outcome", "cancelled")
}

// refusals is turnstile_refusals_total for one reason, over every channel.
func (g *testGateway) refusals(reason metrics.RefusalReason) float64 {
	var sum float64
	for _, ch := range append(slices.Clone(metrics.Channels), metrics.ChannelNone) {
		sum += testutil.ToFloat64(g.gw.sessions.Metrics.Refusals.WithLabelValues(string(reason), ch.String()))
	}
	return sum
}

// waitRefusals waits until refusals(reason) is want: a refusal that closes
// the connection is counted once the close has gone out, so a test that saw
// the close may read the counter an instant early.
func (g *testGateway) waitRefusals(t testing.TB, reason metrics.RefusalReason, want float64) {
	t.Helper()
	testwait.ForNil(t, "refusals{"+string(reason)+"} to reach the expected count", func() error {
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

// eventsUntilClose reads until the gateway closes the connection, fails
// unless it closes it with code (what names the connection's end in the
// failure), and returns the events read before.
func (c *wsClient) eventsUntilClose(what string, code websocket.StatusCode) []event {
	c.t.Helper()
	var evs []event
	for {
		ev, err := c.read()
		if err != nil {
			if got := websocket.CloseStatus(err); got != code {
				c.t.Fatalf("%s ended with %v (close %d), want close %d", what, err, got, code)
			}
			return evs
		}
		evs = append(evs, ev)
	}
}

// expectCloseError fails unless err is a close frame of code whose reason
// ends with suffix; what names the connection's end in the failure.
func expectCloseError(t *testing.T, what string, err error, code websocket.StatusCode, suffix string) {
	t.Helper()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != code || !strings.HasSuffix(ce.Reason, suffix) {
		t.Fatalf("%s ended with %v, want %d ending %q", what, err, code, suffix)
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
func withPolicy(t *testing.T, cfg gateway.Config, yaml string) gateway.Config {
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
func redisClientFor(t testing.TB, cfg gateway.Config) redis.UniversalClient {
	t.Helper()
	rdb, err := store.NewRedisClient(string(cfg.RedisURL), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
