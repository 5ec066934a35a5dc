package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// In voice every tool has a soft latency budget of 1 s, not only retrieval
// tools: an HTTP tool (action, no softLatencyMs in its manifest) that takes
// 1.5 s on the gateway's clock is answered, and counted as slow (the
// orchestrator's tests check the log line).
func TestVoiceHTTPToolOverASecondIsCountedAsSlow(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	svc := newAPIService(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status": "open"}`)
	})
	t.Cleanup(free) // before svc.Close, which waits for the handler
	schema := fmt.Sprintf(`{
  "name": "lookup_ticket",
  "category": "action",
  "modes": ["voice"],
  "redact": {"args": ["id"], "result": ["status"]},
  "http": {"url": "%s/tickets/lookup", "method": "GET"},
  "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
}`, svc.URL)
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": toolsDir(t, map[string]string{"lookup_ticket": schema})})
	clock := clock.NewFake(time.Now())
	cfg.Clock = clock
	g, script := startVoiceGateway(t, cfg, nil)
	c, _, u := startInVoice(t, g, script)

	ids, err := u.SendToolCall(fakegemini.Call{Name: "lookup_ticket", Args: map[string]any{"id": "T-1"}})
	must(t, err)
	testwait.For(t, "the ticket service to get the call", func() bool { return svc.calls.Load() == 1 })
	clock.Advance(1500 * time.Millisecond)
	free()
	if r := last(untilResult(c, ids[0])); r["ok"] != true || r["durationMs"] != float64(1500) {
		t.Fatalf("tool.result %v, want ok after 1500 ms", r)
	}
	const want = `turnstile_tool_soft_latency_exceeded_total{mode="voice",tool="lookup_ticket"} 1`
	testwait.For(t, want, func() bool {
		_, body := get(t, g.adminURL+"/metrics")
		return strings.Contains(body, want)
	})
}
