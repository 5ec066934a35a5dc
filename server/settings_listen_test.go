package server

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

func TestListenerRowsTakeAddressesAndRefuseBadOnesByName(t *testing.T) {
	rows := append([]settings.Setting[Listeners]{AddrSetting(), AdminAddrSetting()}, TLSSettings()...)
	var l Listeners
	if err := settings.Read(&l, rows, func(string) string { return "" }); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if l != (Listeners{Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9090"}) {
		t.Errorf("defaults = %+v, want loopback 8080 and 9090 without TLS", l)
	}
	env := map[string]string{"TURNSTILE_ADDR": "localhost", "TURNSTILE_ADMIN_ADDR": ":70000",
		"TURNSTILE_TLS_CERT_FILE": filepath.Join(t.TempDir(), "absent.pem")}
	err := settings.Read(&Listeners{}, rows, func(k string) string { return env[k] })
	for _, want := range []string{"TURNSTILE_ADDR: must be host:port", "TURNSTILE_ADMIN_ADDR: port must be a number",
		"TURNSTILE_TLS_CERT_FILE: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestHalfATLSPairIsRefusedNamingTheMissingFile(t *testing.T) {
	cert := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{"TURNSTILE_TLS_CERT_FILE": "TURNSTILE_TLS_CERT_FILE=" + cert}
	errs := Listeners{TLSCertFile: cert}.TLSChecks(nil, shown)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "needs TURNSTILE_TLS_KEY_FILE too") {
		t.Errorf("a certificate without its key: %v, want one error asking for the key", errs)
	}
	if errs := (Listeners{TLSCertFile: cert, TLSKeyFile: cert}).TLSChecks(nil, shown); len(errs) != 1 {
		t.Errorf("a pair that does not load: %v, want it refused", errs)
	}
	if errs := (Listeners{}).TLSChecks(nil, shown); errs != nil {
		t.Errorf("no TLS: %v, want no error", errs)
	}
}

func TestAccessRowsNormaliseOriginsAndCheckTheAdminToken(t *testing.T) {
	rows := append([]settings.Setting[Access]{OriginsSetting()}, AdminSettings()...)
	env := map[string]string{"TURNSTILE_ALLOWED_ORIGINS": " HTTPS://App.Example.com/ , https://*.example.org:8443",
		"TURNSTILE_ADMIN_TOKEN": strings.Repeat("t", MinAdminTokenBytes)}
	var a Access
	if err := settings.Read(&a, rows, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("valid access refused: %v", err)
	}
	if want := []string{"https://app.example.com", "https://*.example.org:8443"}; !reflect.DeepEqual(a.AllowedOrigins, want) ||
		string(a.AdminToken) != env["TURNSTILE_ADMIN_TOKEN"] || a.AdminMetricsOpen {
		t.Errorf("access = %+v, want origins %v and the token", a, want)
	}
	env = map[string]string{"TURNSTILE_ALLOWED_ORIGINS": "ftp://x.example.com", "TURNSTILE_ADMIN_TOKEN": "short"}
	err := settings.Read(&Access{}, rows, func(k string) string { return env[k] })
	for _, want := range []string{`TURNSTILE_ALLOWED_ORIGINS: "ftp://x.example.com": an origin is`,
		"TURNSTILE_ADMIN_TOKEN: must be at least 32 bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestOnlyLoopbackAddressesCountAsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:0": true, "LocalHost:1": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.1:80": false, "example.com:80": false, "127.0.0.1": false} {
		if got := IsLoopbackAddr(addr); got != want {
			t.Errorf("IsLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
