package server

// The listeners' settings: where the public and the admin listener listen,
// TLS on both, the browser Origins the public one lets upgrade and the
// admin routes' token. Each is a row of a table the gateway lifts into its
// own; the gateway opens the listeners, this package serves them.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Listeners are where the gateway's two listeners listen, and TLS on both.
type Listeners struct {
	// Addr is the public listener's host:port: the web client, /v1/ws.
	Addr string
	// AdminAddr is the admin listener's host:port: /metrics,
	// /metrics/summary, /healthz, /readyz, /admin/.
	AdminAddr string
	// TLSCertFile is the PEM certificate (chain) both listeners serve;
	// "": plain HTTP. TLSKeyFile is its key: both or neither (TLSChecks).
	TLSCertFile string
	TLSKeyFile  string
}

// Access is who may use the listeners: the browser Origins allowed to open
// a WebSocket, and the token of the admin routes.
type Access struct {
	// AllowedOrigins are Origin patterns, scheme://host[:port] with
	// path.Match syntax in the host (e.g. "https://*.example.com"); see
	// checkOrigin for what else is allowed. Empty: the gateway's own host.
	AllowedOrigins []string
	// AdminToken, when set, is the bearer token every admin route but
	// /healthz and /readyz requires (and /metrics unless
	// AdminMetricsOpen).
	AdminToken       settings.Secret
	AdminMetricsOpen bool
}

// AddrSetting is the row of the public listener's address.
func AddrSetting() settings.Setting[Listeners] {
	return addrSetting("TURNSTILE_ADDR", "127.0.0.1:8080", "listen address, host:port",
		func(l *Listeners) *string { return &l.Addr })
}

// AdminAddrSetting is the row of the admin listener's address.
func AdminAddrSetting() settings.Setting[Listeners] {
	return addrSetting("TURNSTILE_ADMIN_ADDR", "127.0.0.1:9090",
		"host:port of the admin listener: /metrics, /metrics/summary, /healthz, /readyz, /admin/ (the public one serves none of them); off loopback it needs TURNSTILE_ADMIN_TOKEN",
		func(l *Listeners) *string { return &l.AdminAddr })
}

// addrSetting is the row of a listener's address (CheckAddr) in field.
func addrSetting(env, def, usage string, field func(*Listeners) *string) settings.Setting[Listeners] {
	return settings.Setting[Listeners]{Env: env, Def: def, Usage: usage,
		Apply: func(l *Listeners, v string) error {
			if err := CheckAddr(v); err != nil {
				return err
			}
			*field(l) = v
			return nil
		}}
}

// TLSSettings are the rows of the certificate and its key.
func TLSSettings() []settings.Setting[Listeners] {
	return []settings.Setting[Listeners]{
		{Env: "TURNSTILE_TLS_CERT_FILE", DefDoc: "unset: plain HTTP",
			Usage: "PEM certificate (chain) both listeners serve TLS 1.2+ with, read again when the file changes; needs TURNSTILE_TLS_KEY_FILE",
			Apply: settings.OptionalFile("", func(l *Listeners) *string { return &l.TLSCertFile })},
		{Env: "TURNSTILE_TLS_KEY_FILE", DefDoc: "unset: plain HTTP",
			Usage: "PEM private key of TURNSTILE_TLS_CERT_FILE, read again when the file changes",
			Apply: settings.OptionalFile("", func(l *Listeners) *string { return &l.TLSKeyFile })},
	}
}

// TLSChecks wants both TLS files or neither, and a pair that loads;
// failed are the settings that already failed, shown how each is named.
func (l Listeners) TLSChecks(failed map[string]bool, shown map[string]string) []error {
	if failed["TURNSTILE_TLS_CERT_FILE"] || failed["TURNSTILE_TLS_KEY_FILE"] {
		return nil
	}
	switch {
	case l.TLSCertFile == "" && l.TLSKeyFile == "":
		return nil
	case l.TLSKeyFile == "":
		return []error{fmt.Errorf("%s: needs TURNSTILE_TLS_KEY_FILE too (both or neither)", shown["TURNSTILE_TLS_CERT_FILE"])}
	case l.TLSCertFile == "":
		return []error{fmt.Errorf("%s: needs TURNSTILE_TLS_CERT_FILE too (both or neither)", shown["TURNSTILE_TLS_KEY_FILE"])}
	}
	if err := CheckCertFiles(l.TLSCertFile, l.TLSKeyFile); err != nil {
		return []error{fmt.Errorf("TURNSTILE_TLS_CERT_FILE, TURNSTILE_TLS_KEY_FILE: %w", err)}
	}
	return nil
}

// OriginsSetting is the row of the browser Origins allowed to connect.
func OriginsSetting() settings.Setting[Access] {
	return settings.Setting[Access]{Env: "TURNSTILE_ALLOWED_ORIGINS", DefDoc: "unset: same host only",
		Usage: "comma-separated browser Origins allowed to connect, e.g. https://app.example.com,https://*.example.com",
		Apply: parseOrigins}
}

// AdminSettings are the rows of the admin routes' token and of /metrics
// without it.
func AdminSettings() []settings.Setting[Access] {
	return []settings.Setting[Access]{
		{Env: "TURNSTILE_ADMIN_TOKEN", DefDoc: "unset: the admin listener must be on loopback", Secret: true,
			Usage: fmt.Sprintf("bearer token every admin route but /healthz and /readyz requires (at least %d bytes); required when TURNSTILE_ADMIN_ADDR is not loopback", MinAdminTokenBytes),
			Apply: func(a *Access, v string) error {
				switch {
				case v == "":
					return nil
				case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
					return errors.New("contains whitespace or control characters")
				case len(v) < MinAdminTokenBytes:
					return fmt.Errorf("must be at least %d bytes (e.g. openssl rand -hex 32)", MinAdminTokenBytes)
				}
				a.AdminToken = settings.Secret(v)
				return nil
			}},
		{Env: "TURNSTILE_ADMIN_METRICS_OPEN", Def: "false",
			Usage: "true: /metrics answers without TURNSTILE_ADMIN_TOKEN (for a scraper that cannot send it); the other admin routes still need it",
			Apply: settings.Bool(func(a *Access) *bool { return &a.AdminMetricsOpen })},
	}
}

// CheckAddr says what is wrong with a listen address, nil when nothing:
// host:port with a numeric port; an empty host is every interface.
func CheckAddr(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("must be host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return errors.New("port must be a number from 0 to 65535")
	}
	if strings.ContainsFunc(host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errors.New("host has spaces or control characters")
	}
	return nil
}

// IsLoopbackAddr reports whether a valid host:port only listens on this
// machine. An empty host means every interface.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopbackHost(host)
}

// parseOrigins accepts scheme://host[:port] entries; the host may start
// with "*." to match subdomains.
func parseOrigins(a *Access, v string) error {
	var out, bad []string
	for _, o := range strings.Split(v, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
			strings.Contains(strings.TrimPrefix(u.Hostname(), "*."), "*") {
			bad = append(bad, strconv.Quote(o))
			continue
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: an origin is scheme://host[:port] with scheme http or https, "+
			"optionally *.host for subdomains", strings.Join(bad, ", "))
	}
	a.AllowedOrigins = out
	return nil
}
