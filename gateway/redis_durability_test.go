package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// A Redis with neither AOF nor RDB snapshots nor a replica loses every
// session when it restarts: the gateway says so at startup, loudly in the
// log and on /readyz (still ready), pointing at the fix; once Redis
// persists (appendonly yes), it says nothing.
func TestReadyzWarnsOfARedisWithoutPersistence(t *testing.T) {
	srv := redistest.StartServer(t) // --save "" --appendonly no, no replica
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + srv.Addr)

	readyz := func(g *testGateway) map[string]any {
		t.Helper()
		code, body := get(t, g.adminURL+"/readyz")
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil || code != http.StatusOK {
			t.Fatalf("/readyz: %d %s (%v), want 200", code, body, err)
		}
		return v
	}
	g := startGateway(t, cfg, nil)
	ws, _ := readyz(g)["warnings"].([]any)
	if len(ws) != 1 || !strings.Contains(ws[0].(string), "no persistence") ||
		!strings.Contains(ws[0].(string), "docs/operations.md") {
		t.Fatalf("/readyz warnings %v, want one naming the missing persistence and the fix", ws)
	}
	var buf bytes.Buffer
	redisDurability(context.Background(), cfg, redisClientFor(t, cfg), slog.New(slog.NewTextHandler(&buf, nil)))
	if line := buf.String(); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "REDIS WITHOUT PERSISTENCE") {
		t.Fatalf("log %q, want a WARN line saying Redis has no persistence", line)
	}

	if err := redisClientFor(t, cfg).ConfigSet(context.Background(), "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	if v := readyz(startGateway(t, cfg, nil)); v["warnings"] != nil {
		t.Fatalf("/readyz with AOF on: %v, want no warnings", v)
	}
}
