package store

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// NewRedisClient builds a client for a redis:// or rediss:// URL (the
// REDIS_URL setting) tuned for the realtime path: every network step is
// bounded by timeout and the caller's context deadline, a failed command is
// retried once, and a caller waits at most timeout for a pooled connection.
// go-redis defaults (5 s dial and read, 3 retries) would let one dead Redis
// stall a voice turn for many seconds. It does not connect; the first command
// does.
func NewRedisClient(rawURL string, timeout time.Duration) (redis.UniversalClient, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("redis client: timeout must be positive, got %v", timeout)
	}
	// Checked before parsing: ParseURL also takes unix:// URLs, which the
	// universal client cannot dial.
	if !strings.HasPrefix(rawURL, "redis://") && !strings.HasPrefix(rawURL, "rediss://") {
		return nil, errors.New("REDIS_URL must start with redis:// or rediss://")
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL is not a valid redis:// or rediss:// URL: %w", redactURLError(err))
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:      []string{opt.Addr},
		ClientName: opt.ClientName,
		DB:         opt.DB,
		Protocol:   opt.Protocol,
		Username:   opt.Username,
		Password:   opt.Password,
		TLSConfig:  opt.TLSConfig,

		ContextTimeoutEnabled: true,
		DialTimeout:           timeout,
		DialerRetries:         1,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		MaxRetries:            1,
		PoolTimeout:           timeout,

		// Maintenance notifications are a Redis Enterprise/Cloud feature; the
		// handshake probe would only add a round trip to every new connection.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}), nil
}

// redactURLError drops the URL that net/url quotes in its errors: it may
// carry the Redis password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
