package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/metrics"
)

// A phone call's stream start carries the call identity this gateway
// signed in its webhook answer (telephony.Signer), valid for a few
// minutes. A signed start opens one stream: its signature is recorded, on
// every node, the first time a stream uses it, so that the same start sent
// again — by anyone who saw it — is refused however the first stream
// ended. The record is a plain key on the call's hash tag (beside the
// call's stream lease), kept a little longer than the start stays valid.

func callStartKey(callSID, signature string) string {
	return "turnstile:call:{" + callSID + "}:start:" + signature
}

// UseCallStart records the first use of callSID's signed start (signature
// is the start's signature) and reports whether this was it: false when a
// stream used the same start before, on any node, within ttl. One round
// trip (SET NX with an expiry). The error is non-nil only when Redis did
// not answer; first is then false.
func (s *RedisStore) UseCallStart(ctx context.Context, callSID, signature string, ttl time.Duration) (bool, error) {
	var first bool
	err := s.call(ctx, metrics.RedisCallStart, func(ctx context.Context) error {
		// Sent once (script.go): a SET NX sent again after its reply was
		// lost would find its own key and refuse the start as a replay.
		err := s.c.Process(ctx, once(ctx, "set", callStartKey(callSID, signature), "1", "nx", "px", ttl.Milliseconds()))
		if errors.Is(err, redis.Nil) {
			return nil // set before: a replay
		}
		if err != nil {
			return fmt.Errorf("call start: %w", err)
		}
		first = true
		return nil
	})
	return first, err
}
