package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/store"
)

const testRedisPassword = "correct-horse-battery"

// startPasswordRedis runs a real redis-server that requires a password
// (requirepass, set as the server starts answering) and has an ACL user
// "app" with the permissions docs/operations.md asks for and a user
// "cramped" whose keys are not the gateway's. It returns the address.
func startPasswordRedis(t *testing.T) string {
	t.Helper()
	addr := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	ctx := t.Context()
	for _, cmd := range [][]any{
		append([]any{"ACL", "SETUSER", "app", "on", ">app-password", "~turnstile:*", "&turnstile:*"}, aclCategories()...),
		{"ACL", "SETUSER", "notx", "on", ">notx-password", "~turnstile:*", "+@all", "-@transaction"},
		{"ACL", "SETUSER", "cramped", "on", ">cramped-password", "~other:*", "+@all"},
		{"CONFIG", "SET", "requirepass", testRedisPassword},
	} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("redis %v: %v", cmd[:2], err)
		}
	}
	return addr
}

// aclCategories are the categories the startup error (and
// docs/operations.md) asks for.
func aclCategories() []any {
	var out []any
	for _, c := range strings.Fields(redisACLCategories) {
		out = append(out, c)
	}
	return out
}

// runGateway runs the gateway as main does (serve, with its JSON log) and
// returns the log and serve's error. A gateway that does not stop by
// itself is stopped after 10 s, and the test fails.
func runGateway(t *testing.T, env map[string]string) (string, error) {
	t.Helper()
	cfg, err := loadConfig(nil, configEnv(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = serve(ctx, cfg, slog.New(slog.NewJSONHandler(&out, nil)), nil)
	if ctx.Err() != nil {
		t.Fatalf("the gateway did not stop by itself; log:\n%s", out.String())
	}
	return out.String(), err
}

func TestRedisThatRefusesTheGatewayStopsItAtStartup(t *testing.T) {
	addr := startPasswordRedis(t)
	cases := []struct {
		name, url string
		want      []string // in the log line that stops the gateway
	}{
		{"wrong password", "redis://:wrong@" + addr + "/0", []string{"WRONGPASS", "password in REDIS_URL"}},
		{"no password", "redis://" + addr + "/0", []string{"NOAUTH", "password in REDIS_URL"}},
		{"wrong user", "redis://nobody:" + testRedisPassword + "@" + addr + "/0", []string{"WRONGPASS", "user name and password"}},
		{"a database Redis does not have", "redis://:" + testRedisPassword + "@" + addr + "/99", []string{"DB index", "/DB at the end of the URL"}},
		{"a user without permission on the gateway's keys", "redis://cramped:cramped-password@" + addr + "/0",
			[]string{"NOPERM", "~turnstile:*"}},
		{"a user who may not run transactions", "redis://notx:notx-password@" + addr + "/0",
			[]string{"NOPERM", "+@transaction"}},
		{"TLS to a plain port", "rediss://:" + testRedisPassword + "@" + addr + "/0", []string{"TLS to Redis failed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runGateway(t, map[string]string{"REDIS_URL": tc.url, "TURNSTILE_ADDR": "127.0.0.1:0"})
			if err == nil {
				t.Fatalf("the gateway started; log:\n%s", out)
			}
			msg := err.Error()
			for _, w := range append(tc.want, "REDIS_URL=", "Redis refused this gateway") {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q: %s", w, msg)
				}
			}
			if strings.Contains(out, "gateway listening") {
				t.Errorf("the gateway listened before stopping:\n%s", out)
			}
			for _, secret := range []string{testRedisPassword, "cramped-password", ":wrong@"} {
				if strings.Contains(out+msg, secret) {
					t.Errorf("the log or the error shows the password %q: %s\n%s", secret, msg, out)
				}
			}
		})
	}
}

// A gateway whose Redis user has the right password and, for an ACL
// user, exactly the permissions the docs ask for, serves everything that
// touches Redis: sessions, history, the call ledger, confirmations, resume.
func TestRedisWithTheRightCredentialsServesSessions(t *testing.T) {
	addr := startPasswordRedis(t)
	for name, url := range map[string]string{
		"requirepass": "redis://:" + testRedisPassword + "@" + addr + "/0",
		"an ACL user with the documented permissions": "redis://app:app-password@" + addr + "/3",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := withPolicy(t, defaultTestConfig(t), confirmKBGet)
			cfg.RedisURL = gateway.SecretURL(url)
			brain := fakegemini.NewScript(
				callStep(getCall("shipping")), textStep("I need your approval first."),
				callStep(getCall("shipping")), textStep("Shipping takes two days."),
			)
			g := startGateway(t, cfg, brain)
			c := g.dial("", nil)
			ready := c.start(nil)
			req := askForConfirmation(t, c)
			_ = c.c.CloseNow()

			// Everything is in this Redis: a resume finds the session and
			// its pending confirmation, and the approved call runs.
			c2 := g.dial("", nil)
			again := c2.start(map[string]any{"resume": map[string]any{
				"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
			if again["resumed"] != true || len(again["history"].([]any)) != 2 {
				t.Fatalf("resume: %v", again)
			}
			if pending, _ := again["pendingConfirmations"].([]any); len(pending) != 1 {
				t.Fatalf("pendingConfirmations on resume = %v", again["pendingConfirmations"])
			}
			confirm(c2, req.str("token"), true)
			evs := confirmationTurn(t, c2, req.str("token"), "approved")
			if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true {
				t.Fatalf("approved kb_get: %v", res)
			}
			if n := counterSum(t, g.reg, "turnstile_redis_errors_total"); n != 0 {
				t.Errorf("%v failed Redis operations", n)
			}
		})
	}
}

func TestUnreachableRedisAtStartupStartsTheGatewayNotReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused

	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://:" + testRedisPassword + "@" + addr + "/0")
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	gw, err := assemble(context.Background(), cfg, prometheus.NewRegistry(), log, brains{})
	if err != nil {
		t.Fatalf("assemble with Redis unreachable: %v", err)
	}
	defer gw.close()
	if !strings.Contains(logs.String(), "redis not reachable at startup; starting anyway") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), testRedisPassword) {
		t.Errorf("the log shows the password:\n%s", logs.String())
	}
	rec := httptestGet(t, gw.edge.Handler(), "/readyz")
	if rec.code != http.StatusServiceUnavailable || !strings.Contains(rec.body, "redis unreachable") {
		t.Errorf("/readyz = %d %s, want 503 redis unreachable", rec.code, rec.body)
	}
}

// Replies a real server gives only in states a test cannot easily provoke
// come from a stand-in that answers every command with one error reply,
// read by the real go-redis client.
func TestRedisErrorsThatPassByThemselvesDoNotStopTheGateway(t *testing.T) {
	check := func(msg string) (string, bool) {
		t.Helper()
		cfg := defaultTestConfig(t)
		cfg.RedisURL = gateway.SecretURL("redis://" + startReplyServer(t, msg) + "/0")
		rdb, err := store.NewRedisClient(string(cfg.RedisURL), cfg.RedisTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		err = redisCheckScript.Run(t.Context(), rdb, []string{redisCheckKey}).Err()
		if err == nil || !strings.Contains(err.Error(), strings.Fields(msg)[0]) {
			t.Fatalf("check against a server answering %q: %v", msg, err)
		}
		return redisRefusal(err)
	}
	for _, msg := range []string{
		"LOADING Redis is loading the dataset in memory",
		"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
		"READONLY You can't write against a read only replica.",
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
		"CLUSTERDOWN The cluster is down",
		"TRYAGAIN Multiple keys request during rehashing of slot",
		"OOM command not allowed when used memory > 'maxmemory'.",
		"ERR max number of clients reached",
	} {
		if hint, fatal := check(msg); fatal {
			t.Errorf("%q is fatal (%s), want transient", msg, hint)
		}
	}
	for msg, want := range map[string]string{
		"MOVED 3999 127.0.0.1:6381":     "cluster node",
		"ERR unknown command 'EVALSHA'": "see its message",
	} {
		if hint, fatal := check(msg); !fatal || !strings.Contains(hint, want) {
			t.Errorf("%q: fatal %v, hint %q; want fatal with %q", msg, fatal, hint, want)
		}
	}
	if _, fatal := redisRefusal(context.DeadlineExceeded); fatal {
		t.Error("a timeout is fatal, want transient")
	}
}

// startReplyServer serves RESP on loopback and answers every command with
// the error reply msg; it returns the address.
func startReplyServer(t *testing.T, msg string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				context.AfterFunc(t.Context(), func() { _ = c.Close() })
				r := bufio.NewReader(c)
				for skipCommand(r) == nil {
					if _, err := io.WriteString(c, "-"+msg+"\r\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// skipCommand reads one RESP command (an array of bulk strings).
func skipCommand(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return err
	}
	for range n {
		head, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		if err != nil {
			return err
		}
		if _, err := r.Discard(size + 2); err != nil {
			return err
		}
	}
	return nil
}

type httpResult struct {
	code int
	body string
}

func httptestGet(t *testing.T, h http.Handler, path string) httpResult {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
	return httpResult{rec.Code, rec.Body.String()}
}
