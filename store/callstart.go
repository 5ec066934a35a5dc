package store

import (
	"context"
	"fmt"
	"time"

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
		ok, err := s.c.SetNX(ctx, callStartKey(callSID, signature), "1", ttl).Result()
		if err != nil {
			return fmt.Errorf("call start: %w", err)
		}
		first = ok
		return nil
	})
	return first, err
}
