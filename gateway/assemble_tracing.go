package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tracing"
)

// tracingShutdown bounds the export of the spans still queued when the
// gateway stops: a collector that is down must not hold the exit up.
const tracingShutdown = 5 * time.Second

// startTracing starts the OpenTelemetry tracer provider when the OTEL_*
// variables ask for it (nil otherwise); it is shut down, exporting what is
// queued, after everything else has closed.
func startTracing(ctx context.Context, cfg Config, version string, m *metrics.Metrics, log *slog.Logger,
	gw *gateway) (*tracing.Provider, error) {
	m.InitSpansDropped(tracing.DropReasons)
	if !cfg.Tracing.Enabled {
		return nil, nil
	}
	users, stable := gw.users, gw.usersStable
	if !stable {
		log.Warn("tracing: user pseudonyms use a random key, so they change at each start and differ between nodes; " +
			"set TURNSTILE_PSEUDONYM_KEY (or TURNSTILE_AUTH_SECRET) for stable ones")
	}
	p, err := tracing.Start(ctx, cfg.Tracing, tracing.Options{ServiceVersion: version, Users: users,
		Dropped: m.SpansDropped,
		Log:     log.With("component", "tracing")})
	if err != nil {
		return nil, err
	}
	gw.tracing = p
	gw.closers = append(gw.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans still queued at shutdown were not all exported", "err", err)
		}
	})
	return p, nil
}
