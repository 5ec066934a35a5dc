package server

import (
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// toolClaims picks the claims AuthConfig.ToolClaims names out of a verified
// token, as tools are sent them (Turnstile-Claim-<name>, MCP _meta). A
// claim the token does not have is left out; one whose value cannot be
// forwarded (an object, a line break, too long: tools.ClaimValue) is left
// out too, with a warning at most once a minute per claim name that never
// shows the value. nil when no claim is forwarded.
func (a *Authenticator) toolClaims(claims jwt.MapClaims) tools.Claims {
	return a.pickClaims(a.cfg.ToolClaims, claims, "tools")
}

// contextClaims picks the claims AuthConfig.ContextClaims names, the facts
// the model is told about the user, by the same rules.
func (a *Authenticator) contextClaims(claims jwt.MapClaims) tools.Claims {
	return a.pickClaims(a.cfg.ContextClaims, claims, "the model")
}

// pickClaims picks the named claims that can be passed on (to whom, for
// the log line) out of a verified token.
func (a *Authenticator) pickClaims(names []string, claims jwt.MapClaims, to string) tools.Claims {
	var out tools.Claims
	for _, name := range names {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		v, err := tools.ClaimValue(raw)
		if err != nil {
			if n, ok := a.dropped.Note(to+" "+name, clock.Wall.Now(), 1); ok {
				a.cfg.Log.Warn("token claim not forwarded to "+to, "claim", name, "err", err, "count", n)
			}
			continue
		}
		if out == nil {
			out = tools.Claims{}
		}
		out[name] = v
	}
	return out
}

// profileClaims reads the token's assistant profile (its profile claim, a
// string) and the profiles a session.start may pick (its profiles claim: an
// array of strings, or one string of comma-separated names). Names that
// cannot be a profile's are left out; whether they exist is the session's
// business (docs/profiles.md).
func profileClaims(claims jwt.MapClaims) (string, []string) {
	profile, _ := claims["profile"].(string)
	if !protocol.ValidProfileName(profile) {
		profile = ""
	}
	var names []string
	switch v := claims["profiles"].(type) {
	case string:
		for n := range strings.SplitSeq(v, ",") {
			names = append(names, strings.TrimSpace(n))
		}
	case []any:
		for _, e := range v {
			if n, ok := e.(string); ok {
				names = append(names, n)
			}
		}
	}
	return profile, slices.DeleteFunc(names, func(n string) bool { return !protocol.ValidProfileName(n) })
}
