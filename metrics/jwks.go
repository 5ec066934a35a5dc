package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// JWKS refresh failure reasons: the closed set of
// turnstile_jwks_refresh_failures_total's reason label. Each fetch of the
// key set counts at most one.
const (
	// JWKSUnreachable: no answer (connection refused, timeout, TLS).
	JWKSUnreachable = "unreachable"
	// JWKSStatus: an HTTP status other than 200.
	JWKSStatus = "status"
	// JWKSDecode: a 200 whose body is not a JSON key set (garbage, HTML, a
	// cut body).
	JWKSDecode = "decode"
	// JWKSNoUsableKey: a key set without a single key the gateway verifies
	// with (`{}`, `{"keys":[]}`, only malformed or unsupported keys). The
	// keys fetched before stay in use.
	JWKSNoUsableKey = "no_usable_key"
	// JWKSMalformedKey: a key set with usable keys and at least one
	// malformed key; the others are used, the malformed kid keeps the
	// version fetched before, if any.
	JWKSMalformedKey = "malformed_key"
)

// JWKSRefreshFailureReasons is the closed set, in documentation order.
var JWKSRefreshFailureReasons = []string{JWKSUnreachable, JWKSStatus, JWKSDecode, JWKSNoUsableKey, JWKSMalformedKey}

func newJWKSRefreshFailures(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_jwks_refresh_failures_total",
		"Fetches of the JWKS (TURNSTILE_AUTH_JWKS_URL) that failed or were used only in part, by reason.", "reason")
	for _, r := range JWKSRefreshFailureReasons {
		c.WithLabelValues(r)
	}
	return c
}

// JWKSRefreshFailure counts one failed (or partly used) fetch of the key
// set; a reason outside JWKSRefreshFailureReasons is counted as decode.
func (m *Metrics) JWKSRefreshFailure(reason string) {
	if !slices.Contains(JWKSRefreshFailureReasons, reason) {
		reason = JWKSDecode
	}
	m.JWKSRefreshFailures.WithLabelValues(reason).Inc()
}
