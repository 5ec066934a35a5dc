package main

import (
	"errors"
	"strings"
	"testing"
)

func TestLoopbackCheckAcceptsOnlyThisMachine(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"ws://127.0.0.1:8080/v1/ws", true},
		{"ws://127.45.6.7/v1/ws", true},
		{"wss://localhost:8443/v1/ws", true},
		{"ws://LocalHost/v1/ws", true},
		{"ws://[::1]:8080/v1/ws", true},
		{"ws://[::ffff:127.0.0.1]:8080/v1/ws", true},
		{"ws://10.0.0.5:8080/v1/ws", false},
		{"ws://192.168.1.10/v1/ws", false},
		{"ws://172.16.0.1/v1/ws", false},
		{"ws://0.0.0.0:8080/v1/ws", false},
		{"ws://128.0.0.1/v1/ws", false},
		{"ws://[::2]/v1/ws", false},
		{"ws://example.com/v1/ws", false},
		{"ws://localhost.example.com/v1/ws", false},
		{"ws://127.0.0.1.example.com/v1/ws", false},
		{"ws:///v1/ws", false},
	} {
		err := checkLoopbackURL(tc.url, "ws", "wss")
		if (err == nil) != tc.ok {
			t.Errorf("checkLoopbackURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && !tc.ok && !errors.Is(err, errNotLoopback) {
			t.Errorf("checkLoopbackURL(%q) = %v, want errNotLoopback", tc.url, err)
		}
	}
}

func TestLoopbackCheckWantsTheRightScheme(t *testing.T) {
	if err := checkLoopbackURL("http://127.0.0.1:8080/v1/ws", "ws", "wss"); err == nil {
		t.Error("an http URL was accepted for the WebSocket endpoint")
	}
	if err := checkLoopbackURL("ws://127.0.0.1:8080/metrics", "http", "https"); err == nil {
		t.Error("a ws URL was accepted for the metrics endpoint")
	}
}

// The dialer's check runs on the resolved address, so a name that
// resolves off the machine is refused before the socket connects.
func TestDialerRefusesResolvedAddressesOffTheMachine(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080"} {
		if err := refuseNonLoopback("tcp", addr, nil); err != nil {
			t.Errorf("refuseNonLoopback(%s) = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{"10.1.2.3:80", "[2001:db8::1]:443", "93.184.216.34:80", "garbage"} {
		if err := refuseNonLoopback("tcp", addr, nil); err == nil {
			t.Errorf("refuseNonLoopback(%s) = nil, want a refusal", addr)
		}
	}
}

func TestFlagsRefuseARemoteTargetOrMetricsEndpoint(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "ws://10.0.0.1:8080/v1/ws"},
		{"-metrics", "http://192.168.0.2:8080/metrics"},
		{"-client", "twilio", "-relay", "-url", "http://10.0.0.1:8080/v1/telephony/twilio"},
	} {
		var usage strings.Builder
		if _, err := parseFlags(args, &usage); err == nil || !errors.Is(err, errNotLoopback) {
			t.Errorf("parseFlags(%q) = %v, want a loopback refusal", args, err)
		}
	}
}

func TestFlagsBoundTheRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-sessions", "0"}, "-sessions"},
		{[]string{"-duration", "0s"}, "-duration"},
		{[]string{"-duration", "5s", "-ramp", "5s"}, "-ramp"},
		{[]string{"-speech", "10ms"}, "-speech"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-client", "sip"}, "-client"},
		{[]string{"-client", "twilio"}, "add -relay"},
		{[]string{"-client", "twilio", "-relay", "-url", "ws://127.0.0.1:8080/v1/ws"}, "voice webhook"},
	} {
		var usage strings.Builder
		_, err := parseFlags(tc.args, &usage)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error about %s", tc.args, err, tc.want)
		}
	}
	cfg, err := parseFlags([]string{"-sessions", "50", "-duration", "60s", "-ramp", "10s", "-metrics", ""}, &strings.Builder{})
	if err != nil || cfg.Sessions != 50 || cfg.MetricsURL != "" || cfg.URL != defaultURL[clientBrowser] {
		t.Errorf("valid flags: cfg %+v, err %v", cfg, err)
	}
	cfg, err = parseFlags([]string{"-client", "twilio", "-relay"}, &strings.Builder{})
	if err != nil || cfg.URL != "http://127.0.0.1:8080/v1/telephony/twilio" {
		t.Errorf("-client twilio -relay: URL %q, err %v; want the local voice webhook", cfg.URL, err)
	}
}

func TestRealMainExitsTwoOnBadFlags(t *testing.T) {
	var out, errOut strings.Builder
	if code := realMain([]string{"-url", "ws://example.com/v1/ws"}, &out, &errOut); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "loopback") {
		t.Errorf("stderr %q does not say why", errOut.String())
	}
}
