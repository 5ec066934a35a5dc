package gateway_test

import (
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/gateway"
)

// TestReadyGaugeFollowsReadyz: turnstile_ready is what /readyz last
// answered: 0 before any check, 1 while Redis answers, 0 while it does not
// and from the moment the node drains.
func TestReadyGaugeFollowsReadyz(t *testing.T) {
	mr := miniredis.RunT(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + mr.Addr())
	g := startGateway(t, cfg, nil)
	ready := func() float64 {
		t.Helper()
		n, err := testutil.GatherAndCount(g.reg, "turnstile_ready")
		if err != nil || n != 1 {
			t.Fatalf("turnstile_ready: %d series, %v", n, err)
		}
		mfs, _ := g.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "turnstile_ready" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	if got := ready(); got != 0 {
		t.Errorf("before any /readyz: %v, want 0", got)
	}
	steps := []struct {
		name string
		do   func()
		code int
		want float64
	}{
		{"Redis up", func() {}, http.StatusOK, 1},
		{"Redis down", mr.Close, http.StatusServiceUnavailable, 0},
		{"Redis back", func() {
			if err := mr.Restart(); err != nil {
				t.Fatal(err)
			}
		}, http.StatusOK, 1},
		{"draining", g.gw.edge.SetDraining, http.StatusServiceUnavailable, 0},
	}
	for _, s := range steps {
		s.do()
		if s.name == "draining" {
			if got := ready(); got != 0 {
				t.Errorf("%s, before any /readyz: %v, want 0 at once", s.name, got)
			}
		}
		if code, body := get(t, g.url+"/readyz"); code != s.code {
			t.Fatalf("%s: /readyz %d %s, want %d", s.name, code, body, s.code)
		}
		if got := ready(); got != s.want {
			t.Errorf("%s: turnstile_ready = %v, want %v", s.name, got, s.want)
		}
	}
}
