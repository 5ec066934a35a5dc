package gateway

// Settings of the network in front of the gateway: TLS on its listeners and
// the proxies whose forwarding headers name the client.

import (
	"fmt"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/server"
)

func networkSettings() []configSetting {
	return append([]configSetting{
		{Env: "TURNSTILE_TLS_CERT_FILE", DefDoc: "unset: plain HTTP",
			Usage: "PEM certificate (chain) both listeners serve TLS 1.2+ with, read again when the file changes; needs TURNSTILE_TLS_KEY_FILE",
			Apply: settings.OptionalFile("", func(c *Config) *string { return &c.TLSCertFile })},
		{Env: "TURNSTILE_TLS_KEY_FILE", DefDoc: "unset: plain HTTP",
			Usage: "PEM private key of TURNSTILE_TLS_CERT_FILE, read again when the file changes",
			Apply: settings.OptionalFile("", func(c *Config) *string { return &c.TLSKeyFile })},
	}, edgeSettings(server.ProxySettings())...)
}

// tlsChecks wants both TLS files or neither, and a pair that loads.
func tlsChecks(c Config, failed map[string]bool, shown map[string]string) []error {
	if failed["TURNSTILE_TLS_CERT_FILE"] || failed["TURNSTILE_TLS_KEY_FILE"] {
		return nil
	}
	switch {
	case c.TLSCertFile == "" && c.TLSKeyFile == "":
		return nil
	case c.TLSKeyFile == "":
		return []error{fmt.Errorf("%s: needs TURNSTILE_TLS_KEY_FILE too (both or neither)", shown["TURNSTILE_TLS_CERT_FILE"])}
	case c.TLSCertFile == "":
		return []error{fmt.Errorf("%s: needs TURNSTILE_TLS_CERT_FILE too (both or neither)", shown["TURNSTILE_TLS_KEY_FILE"])}
	}
	if err := server.CheckCertFiles(c.TLSCertFile, c.TLSKeyFile); err != nil {
		return []error{fmt.Errorf("TURNSTILE_TLS_CERT_FILE, TURNSTILE_TLS_KEY_FILE: %w", err)}
	}
	return nil
}
