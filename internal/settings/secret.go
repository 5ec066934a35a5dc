package settings

// Values that must not be printed as they are: secrets, and URLs that may
// carry a password.

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
)

// Secret is a configuration value that must never be printed: fmt, slog and text marshalling all
// render it as "set" or "unset". Convert it explicitly (string(s), []byte(s)) where it is used.
type Secret string

func (s Secret) state() string {
	if s == "" {
		return "unset"
	}
	return "set"
}

// Format implements fmt.Formatter for every verb, including %#v.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.state()) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.state()) }

// MarshalText keeps the secret out of JSON and other text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.state()), nil }

// SecretURL is a URL that may carry a password (redis://user:pw@host): fmt, slog and text
// marshalling mask the password. Convert it explicitly (string(u)) where it is used.
type SecretURL string

// Format implements fmt.Formatter for every verb, including %#v.
func (u SecretURL) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, RedactURL(string(u))) }

// LogValue implements slog.LogValuer.
func (u SecretURL) LogValue() slog.Value { return slog.StringValue(RedactURL(string(u))) }

// MarshalText keeps the password out of JSON and other text encodings.
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(RedactURL(string(u))), nil }

// RedactURL masks the password of a URL and the values of its query
// parameters (go-redis reads ?password=, an endpoint may take ?key=) but
// the few that only name servers; a value that does not parse is not shown
// at all, since it may still hold credentials.
func RedactURL(v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil {
		return "(unparseable URL, not shown)"
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, p := range pairs {
			k, _, _ := strings.Cut(p, "=")
			if name, err := url.QueryUnescape(k); err != nil || !shownQueryParam(name) {
				pairs[i] = k + "=xxxxx"
			}
		}
		u.RawQuery = strings.Join(pairs, "&")
	}
	if _, has := u.User.Password(); !has && u.RawQuery == "" {
		return v // nothing to hide: shown as written (url.URL would print "http://" as "http:")
	}
	return u.Redacted()
}

// shownQueryParam: the query parameters of Redis URLs that say where the
// servers are, and nothing secret.
func shownQueryParam(name string) bool {
	switch name {
	case "addr", "master_name", "db", "protocol":
		return true
	}
	return false
}
