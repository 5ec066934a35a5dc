package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// TestLoadAgainstTheRealGateway builds the gateway binary, runs it offline
// (demo Live model, embedded Redis) on a free loopback port, and runs two
// voice sessions for five seconds against it.
func TestLoadAgainstTheRealGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary")
	}
	base, admin := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := run(ctx, Config{
		URL: "ws" + strings.TrimPrefix(base, "http") + "/v1/ws", MetricsURL: admin + "/metrics",
		Sessions: 2, Duration: 5 * time.Second, Ramp: 500 * time.Millisecond,
		Speech: 1200 * time.Millisecond, Silence: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = rep.writeText(&text)
	t.Logf("report:\n%s", text.String())

	if rep.SessionsOK != 2 || rep.SessionsFailed != 0 || rep.ErrorCount() != 0 {
		t.Errorf("sessions %d ok, %d failed, errors %v; want 2 ok and no errors", rep.SessionsOK, rep.SessionsFailed, rep.Errors)
	}
	// Each session's first speech ends at 1.2 s and is answered within the
	// run: at least one completed turn each.
	if rep.Turns < 2 || rep.Latency.Count < 2 {
		t.Errorf("turns %d, answered exchanges %d; want at least 2 of each", rep.Turns, rep.Latency.Count)
	}
	// The demo model waits for 600 ms of silence (the 15th silent frame is
	// sent 560 ms after the first), so a latency measured from the end of
	// the speech cannot be shorter; on loopback it should not be much longer.
	if rep.Latency.P50 < 540 || rep.Latency.Max > 2000 {
		t.Errorf("latency p50 %.0f ms, max %.0f ms; want p50 ≥ 540 ms and max ≤ 2 s", rep.Latency.P50, rep.Latency.Max)
	}
	if rep.Interrupted != 0 || rep.TurnsByReason["interrupted"] != 0 {
		t.Errorf("%d interruptions, turn.done %v: 2 s of silence should let every answer finish", rep.Interrupted, rep.TurnsByReason)
	}
	// A whole answer is 0.96 s of 24 kHz PCM16: 46 080 bytes.
	if rep.AudioBytesReceived < int64(rep.Turns)*46080 {
		t.Errorf("received %d audio bytes for %d turns, want at least %d", rep.AudioBytesReceived, rep.Turns, rep.Turns*46080)
	}
	if rep.AudioBytesSent < 2*4*16000*2 {
		t.Errorf("sent %d audio bytes, want at least 4 s of 16 kHz audio per session", rep.AudioBytesSent)
	}
	g := rep.Gateway
	if g == nil {
		t.Fatal("no gateway figures")
	}
	if g.ActiveSessions != 2 || g.SessionsInWindow != 2 {
		t.Errorf("gateway reports %v active sessions, loadgen %v streaming; want 2 and 2", g.ActiveSessions, g.SessionsInWindow)
	}
	if g.RSSIdleMiB <= 0 || g.CPUCores <= 0 || g.GoroutinesSteady <= g.GoroutinesIdle || g.WindowSeconds < 0.5 {
		t.Errorf("gateway figures look unread: %+v", *g)
	}
}

// TestRelayLoadAgainstTheRealGateway runs relaybench's load through the
// gateway binary to loadgen's echo upstream, over the gateway's real Gemini
// Live adapter: every chunk sent must come back, named by its header.
func TestRelayLoadAgainstTheRealGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary")
	}
	base, admin := startEchoGateway(t, false)
	rep := runRelay(t, Config{URL: "ws" + strings.TrimPrefix(base, "http") + "/v1/ws", MetricsURL: admin + "/metrics"})

	if rep.SessionsOK != 2 || rep.ErrorCount() != 0 {
		t.Errorf("sessions %d ok, errors %v; want 2 ok and no errors", rep.SessionsOK, rep.Errors)
	}
	rl := rep.Relay
	if rl == nil {
		t.Fatal("no relay figures")
	}
	// 2 sessions × 1.5 s of window × 50 chunks a second, give or take.
	if rl.Sent < 100 || rl.Answered != rl.Sent || rl.Lost != 0 || rl.Unmatched != 0 || rl.Dup != 0 {
		t.Errorf("relay figures %+v: want at least 100 chunks, every one answered once", *rl)
	}
	if rl.RTT.P50 <= 0 || rl.RTT.Max < rl.RTT.P99 || rl.RTT.P99 < rl.RTT.P50 {
		t.Errorf("round trips %+v look unmeasured", rl.RTT)
	}
	// Each answer is 1.5 times its chunk.
	if want := rep.AudioBytesSent * 3 / 2; rep.AudioBytesReceived < want*9/10 {
		t.Errorf("received %d audio bytes for %d sent, want about %d", rep.AudioBytesReceived, rep.AudioBytesSent, want)
	}
}

// startEchoGateway serves loadgen's echo upstream (echoing the audio
// itself with content) and the gateway binary on it (with env added) until
// the test ends.
func startEchoGateway(t *testing.T, content bool, env ...string) (base, admin string) {
	t.Helper()
	echo, err := startEcho("127.0.0.1:0", content)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echo.close)
	return startGateway(t, append([]string{"GEMINI_API_KEY=test", "GEMINI_BASE_URL=http://" + echo.addr}, env...)...)
}

// runRelay runs the relay load of cfg's client, URL and token: two
// sessions for four seconds; it logs the report.
func runRelay(t *testing.T, cfg Config) *Report {
	t.Helper()
	cfg.Sessions, cfg.Duration, cfg.Ramp = 2, 4*time.Second, 500*time.Millisecond
	cfg.Speech, cfg.Silence, cfg.Relay, cfg.Late = frameDur, frameDur, true, 200*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = rep.writeText(&text)
	t.Logf("report:\n%s", text.String())
	return rep
}

// startGateway builds cmd/gateway and serves it offline on a free port
// until the test ends (then SIGTERM); it returns the base http URL. env
// adds settings (e.g. GEMINI_BASE_URL) to the offline environment.
func startGateway(t *testing.T, env ...string) (base, admin string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the gateway")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway")
	build := exec.Command(goBin, "build", "-o", bin, "github.com/turnstile-gw/turnstile/cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the gateway: %v\n%s", err, out)
	}
	// A port found free can be taken before the gateway binds it (by its
	// own embedded Redis, on a random port): start again on others.
	for attempt := 1; ; attempt++ {
		base, admin, ok := tryStartGateway(t, bin, filepath.Join(dir, "gateway"+strconv.Itoa(attempt)+".log"), env)
		if ok {
			return base, admin
		}
		if attempt == 3 {
			t.Fatal("the gateway found its ports taken three times")
		}
	}
}

// tryStartGateway runs the gateway on two free ports and waits until it is
// ready; false means it exited because a port was taken meanwhile.
func tryStartGateway(t *testing.T, bin, logName string, env []string) (base, admin string, ok bool) {
	t.Helper()
	addr, adminAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	logFile, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-addr", addr, "-admin-addr", adminAddr, "-log-level", "warn")
	cmd.Env = append(offlineEnv(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	base, admin = "http://"+addr, "http://"+adminAddr
	if err := waitReady(base+"/readyz", exited); err != nil {
		_ = cmd.Process.Kill()
		_ = logFile.Close()
		b, _ := os.ReadFile(logName)
		if strings.Contains(string(b), "address already in use") {
			t.Logf("gateway: a port was taken; trying others")
			return "", "", false
		}
		t.Fatalf("gateway not ready at %s: %v\ngateway log:\n%s", base, err, b)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("gateway exit after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("gateway did not stop within 10 s of SIGTERM")
		}
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logName); err == nil {
				t.Logf("gateway log:\n%s", b)
			}
		}
	})
	return base, admin, true
}

// freeLoopbackAddr finds a port nobody listens on; the gateway's
// "-addr 127.0.0.1:0" would not tell which one it took.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// offlineEnv is this process's environment without the settings that would
// take the gateway off the offline demo model, the embedded Redis or dev mode.
func offlineEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TURNSTILE_") || strings.HasPrefix(name, "GEMINI_") || name == "REDIS_URL" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls url until it answers 200, the gateway exits, or
// testwait.Timeout passes.
func waitReady(url string, exited <-chan error) error {
	client := loopbackClient()
	defer client.CloseIdleConnections()
	var gone bool
	var exitErr error
	err := testwait.Poll(func() error {
		select {
		case exitErr = <-exited:
			gone = true
			return nil // nothing to wait for any more
		default:
		}
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("http %d", resp.StatusCode)
		}
		return nil
	})
	if gone {
		return fmt.Errorf("the gateway exited: %v", exitErr)
	}
	return err
}

// TestTwilioRelayLoadAgainstTheRealGateway runs the relay load as phone
// calls: Twilio's webhook and signed stream, 20 ms μ-law frames, through
// the gateway's μ-law and resampling to the echo upstream and back; every
// chunk sent must come back, matched in order.
func TestTwilioRelayLoadAgainstTheRealGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary")
	}
	base, admin := startEchoGateway(t, true, "TWILIO_AUTH_TOKEN=load-test-token")
	rep := runRelay(t, Config{Client: clientTwilio, URL: base + "/v1/telephony/twilio",
		TwilioAuthToken: "load-test-token", MetricsURL: admin + "/metrics"})

	if rep.SessionsOK != 2 || rep.ErrorCount() != 0 {
		t.Errorf("calls %d ok, errors %v; want 2 ok and no errors", rep.SessionsOK, rep.Errors)
	}
	rl := rep.Relay
	if rl == nil {
		t.Fatal("no relay figures")
	}
	if rl.ChunkBytes != 160 || rl.Sent < 100 || rl.Answered != rl.Sent || rl.Lost != 0 || rl.Unmatched != 0 {
		t.Errorf("relay figures %+v: want 160-byte chunks, at least 100 sent, every one answered", *rl)
	}
	// μ-law in and out at 8 kHz: the answer is as long as the chunk.
	if rep.AudioBytesReceived < rep.AudioBytesSent*9/10 {
		t.Errorf("received %d μ-law bytes for %d sent, want about as many", rep.AudioBytesReceived, rep.AudioBytesSent)
	}
	if g := rep.Gateway; g == nil || g.ActiveSessions != 2 {
		t.Errorf("gateway figures %+v: want 2 sessions active in the window", g)
	}
}
