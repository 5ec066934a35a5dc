package gateway

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestPprofAddrMustBeLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:6060": true, "localhost:6060": true, "[::1]:6060": true,
		":6060": false, "0.0.0.0:6060": false, "10.1.2.3:6060": false, "6060": false} {
		c, err := loadTestConfig(t, []string{"-pprof-addr", addr}, nil)
		if ok && (err != nil || c.PprofAddr != addr) {
			t.Errorf("-pprof-addr %s: %v (PprofAddr %q), want it accepted", addr, err, c.PprofAddr)
		}
		if !ok && err == nil {
			t.Errorf("-pprof-addr %s accepted, want it refused", addr)
		}
	}
	if c, err := loadTestConfig(t, nil, nil); err != nil || c.PprofAddr != "" {
		t.Errorf("default PprofAddr = %q (%v), want off", c.PprofAddr, err)
	}
}

func TestPprofServesProfilesOnItsOwnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	stop, err := startPprof(addr, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("pprof index = %d %.200s, want the profile list", resp.StatusCode, body)
	}
}
