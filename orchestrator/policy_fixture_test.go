package orchestrator_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
)

// Test tools for the policy steps of the pipeline (gates, loops,
// confirmation, terminal calls, shaping, soft latency).

// hugeBytes is the size of the "huge" tool's result, far over the 64 KiB
// result budget.
const hugeBytes = 200 << 10

// slowSearchSleep is how long "slow_search" takes, over its 20 ms soft
// budget and far under its 2 s hard timeout.
const slowSearchSleep = 80 * time.Millisecond

func policyTools() map[string]toolSpec {
	both := `"text","voice"`
	return map[string]toolSpec{
		// search answers {"results": []} for queries starting "nothing",
		// one result otherwise.
		"search": {category: "retrieval", modes: both,
			params:   `"query": {"type": "string", "minLength": 1}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}`,
			required: `"query"`, redact: `"query"`,
			handler: func(_ context.Context, c tools.Call) tools.Envelope {
				var args struct{ Query string }
				_ = json.Unmarshal(c.Args, &args)
				if strings.HasPrefix(args.Query, "nothing") {
					return tools.OK(map[string]any{"results": []any{}, "total": 0})
				}
				return tools.OK(map[string]any{"results": []any{map[string]any{"title": "About " + args.Query}}})
			}},
		"lookup": {category: "retrieval", modes: both, params: `"id": {"type": "string"}`, required: `"id"`, redact: `"id"`,
			handler: func(context.Context, tools.Call) tools.Envelope {
				return tools.OK(map[string]any{"title": "A document"})
			}},
		"slow_search": {category: "retrieval", modes: both, extra: `"softLatencyMs": 20,`, timeoutMs: 2000,
			handler: func(ctx context.Context, _ tools.Call) tools.Envelope {
				select {
				case <-time.After(slowSearchSleep):
					return tools.OK(map[string]any{"results": []any{"late but fine"}})
				case <-ctx.Done():
					return tools.Fail(tools.ErrTransient, "cancelled", true, false)
				}
			}},
		// voice_search is fast enough for text and too slow for its voice
		// budget.
		"voice_search": {category: "retrieval", modes: both, extra: `"softLatencyMs": {"text": 2000, "voice": 20},`,
			handler: func(ctx context.Context, _ tools.Call) tools.Envelope {
				select {
				case <-time.After(slowSearchSleep):
					return tools.OK(map[string]any{"results": []any{"found"}})
				case <-ctx.Done():
					return tools.Fail(tools.ErrTransient, "cancelled", true, false)
				}
			}},
		// transfer moves money: it needs the user's approval.
		"transfer": {category: "action", modes: both, extra: `"requiresConfirmation": true,`,
			params:   `"amount": {"type": "integer", "minimum": 1}, "to": {"type": "string"}, "memo": {"type": "string"}`,
			required: `"amount", "to"`, redact: `"to"`,
			handler: func(_ context.Context, c tools.Call) tools.Envelope {
				var args map[string]any
				_ = json.Unmarshal(c.Args, &args)
				return tools.OK(map[string]any{"transferred": args["amount"], "to": args["to"]})
			}},
		// hang_up is a terminal tool; the text "fail" makes it fail.
		"hang_up": {category: "action", modes: both, extra: `"terminal": true,`,
			params: `"text": {"type": "string"}`, required: `"text"`, redact: `"text"`,
			handler: func(_ context.Context, c tools.Call) tools.Envelope {
				var args struct{ Text string }
				_ = json.Unmarshal(c.Args, &args)
				if args.Text == "fail" {
					env := tools.Fail(tools.ErrPermanent, "the line is busy", false, false)
					env.Intents = []intents.Intent{{Type: intents.SuppressAudio}}
					return env
				}
				return tools.OK(map[string]any{"text": args.Text},
					intents.Intent{Type: intents.SetPendingMessage, Message: "call ended"})
			}},
		"huge": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.OK(strings.Repeat("x", hugeBytes))
		}},
		"huge_list": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			rows := make([]any, 2000)
			for i := range rows {
				rows[i] = map[string]any{"title": "row", "body": strings.Repeat("lorem ipsum ", 8)}
			}
			return tools.OK(map[string]any{"results": rows})
		}},
		// sleepy sleeps for ms milliseconds or until its context ends.
		"sleepy": {modes: both, params: `"ms": {"type": "integer", "minimum": 0, "maximum": 1000}`,
			handler: func(ctx context.Context, c tools.Call) tools.Envelope {
				var args struct{ Ms int }
				_ = json.Unmarshal(c.Args, &args)
				select {
				case <-time.After(time.Duration(args.Ms) * time.Millisecond):
					return tools.OK(map[string]any{"slept": args.Ms})
				case <-ctx.Done():
					return tools.Fail(tools.ErrTransient, "woken up", true, false)
				}
			}},
	}
}

// counted wraps a handler so that the fixture can tell whether it ran.
func counted(h tools.Handler, ran map[string]*atomic.Int64, name string) tools.Handler {
	n := &atomic.Int64{}
	ran[name] = n
	return tools.HandlerFunc(func(ctx context.Context, c tools.Call) tools.Envelope {
		n.Add(1)
		return h.Handle(ctx, c)
	})
}

// finishTool is the built-in tool that ends a run.
const finishTool = "finish"

// addBuiltinFinish adds the real built-in finish tool, manifest and handler.
func addBuiltinFinish(t testing.TB, fsys fstest.MapFS, handlers map[string]tools.Handler, ran map[string]*atomic.Int64) {
	t.Helper()
	addBuiltin(t, fsys, handlers, ran, finishTool)
}

// addBuiltin adds a real built-in tool, manifest and handler.
func addBuiltin(t testing.TB, fsys fstest.MapFS, handlers map[string]tools.Handler, ran map[string]*atomic.Int64, name string) {
	t.Helper()
	for _, file := range []string{"schema.json", "guide.md"} {
		b, err := fs.ReadFile(builtin.FS, name+"/"+file)
		if err != nil {
			t.Fatalf("read built-in %s: %v", name, err)
		}
		fsys[name+"/"+file] = &fstest.MapFile{Data: b}
	}
	handlers[name] = counted(builtin.Handlers(nil)[name], ran, name)
}

// with returns an orchestrator over the fixture's tools, metrics and log
// with the given policy and stores.
func (f *fixture) with(cfg orchestrator.Config, d orchestrator.Deps) *orchestrator.Orchestrator {
	d.Registry, d.Metrics, d.Log = f.tools, f.m, f.orch.Log
	return orchestrator.NewWith(cfg, d)
}

// redisStores is a RedisStore on an in-process miniredis, with a count of
// the client's round trips to it.
type redisStores struct {
	store  *store.RedisStore
	mr     *miniredis.Miniredis
	client redis.UniversalClient
	trips  *roundTrips
}

func newRedisStores(t testing.TB) *redisStores {
	t.Helper()
	mr := miniredis.RunT(t)
	// Generous bounds: these tests are about what is written, and under
	// -race beside other work one miniredis call can take over a second.
	c, err := store.NewRedisClient("redis://"+mr.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	trips := &roundTrips{}
	c.AddHook(trips)
	return &redisStores{store: store.NewRedisStore(c, store.RedisStoreOptions{Redis: store.Redis{RedisTimeout: 5 * time.Second}}), mr: mr, client: c, trips: trips}
}

// deps are the orchestrator stores backed by this Redis.
func (r *redisStores) deps() orchestrator.Deps {
	return orchestrator.Deps{Ledger: r.store, Confirms: r.store}
}

// session stores a new session's record (ledger and confirmation writes
// are fenced on its epoch) and returns it as a turn's session.
func (r *redisStores) session(t testing.TB, id, user string, mode protocol.Mode) orchestrator.Session {
	t.Helper()
	rec, _, err := r.store.Create(context.Background(), store.Record{ID: id, UserID: user, Mode: mode})
	if err != nil {
		t.Fatalf("create session %s: %v", id, err)
	}
	return orchestrator.Session{ID: id, UserID: user, Mode: mode, Epoch: rec.Epoch}
}

func (r *redisStores) ledger(t testing.TB, sessionID string) []orchestrator.CallRecord {
	t.Helper()
	recs, err := r.store.Ledger(context.Background(), sessionID)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	return recs
}

// roundTrips is a go-redis hook counting network round trips: one per
// command sent alone, one per pipeline or transaction. The handshake of a
// new pooled connection (HELLO, CLIENT SETINFO) is the pool's cost, not a
// call's, and is not counted.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) Load() int64 { return r.n.Load() }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !handshake(c) }) {
			return next(ctx, cmds)
		}
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

func handshake(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

// events records what the orchestrator reports to the session.
type events struct {
	mu       sync.Mutex
	received []orchestrator.Call
	redacted []map[string]any
	finished []orchestrator.Outcome
	confirms []orchestrator.Confirmation
}

func (e *events) CallReceived(c orchestrator.Call, redactedArgs map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.received = append(e.received, c)
	e.redacted = append(e.redacted, redactedArgs)
}

func (e *events) CallFinished(_ orchestrator.Call, o orchestrator.Outcome) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finished = append(e.finished, o)
}

func (e *events) ConfirmRequested(c orchestrator.Confirmation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.confirms = append(e.confirms, c)
}

func (e *events) confirmations() []orchestrator.Confirmation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]orchestrator.Confirmation(nil), e.confirms...)
}

// jsonArgs decodes a JSON object the way a provider adapter does, numbers
// kept exact, so tests can spell the same arguments differently.
func jsonArgs(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode args %s: %v", s, err)
	}
	return m
}

// call is shorthand for a call with an id, a tool and arguments.
func call(id, name string, args map[string]any) orchestrator.Call {
	return orchestrator.Call{ID: id, Name: name, Args: args}
}

// handleOne runs one call as its own model message of turn tr.
func handleOne(t testing.TB, tr *orchestrator.Turn, c orchestrator.Call, ev orchestrator.Events) orchestrator.Outcome {
	t.Helper()
	res := tr.Handle(context.Background(), []orchestrator.Call{c}, ev)
	if len(res) != 1 || !res[0].Send {
		t.Fatalf("Handle(%s) = %+v, want one result to send", c.ID, res)
	}
	return res[0].Outcome
}

// errType is the error type of an outcome, or "" for a success.
func errType(o orchestrator.Outcome) tools.ErrorType {
	if o.Envelope.OK || o.Envelope.Error == nil {
		return ""
	}
	return o.Envelope.Error.Type
}

// responseJSON is the model response as sent upstream.
func responseJSON(t testing.TB, o orchestrator.Outcome) []byte {
	t.Helper()
	b, err := json.Marshal(o.Response)
	if err != nil {
		t.Fatalf("encode response: %v", err)
	}
	return b
}
