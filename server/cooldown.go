package server

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// Cooldowns tells how long a user's abuse cooldown still runs (0: none):
// after a connection is closed 4008 for rate abuse, its user is refused
// new connections and resumes, on every node, until it ends (the store's
// RedisStore implements it; the session starts the cooldowns). Errors mean
// Redis did not answer.
type Cooldowns interface {
	CooldownLeft(ctx context.Context, user string) (time.Duration, error)
}

// cooldown is how long user must still wait before connecting; 0 when the
// user may connect. Not applied in dev mode (every browser is the
// anonymous user). When Redis does not answer the user may connect: the
// failure is counted (redis_errors_total{op="cooldown"}) and logged.
func (s *Server) cooldown(ctx context.Context, user string) time.Duration {
	if s.d.Cooldowns == nil || s.d.Auth.DevMode() {
		return 0
	}
	left, err := s.d.Cooldowns.CooldownLeft(ctx, user)
	if err != nil {
		if count, ok := s.throttle.Note("cooldown_check_failed", clock.Wall.Now(), 1); ok {
			s.d.Log.Warn("abuse cooldown not checked: Redis did not answer; connection admitted", "err", err, "count", count)
		}
		return 0
	}
	return left
}
