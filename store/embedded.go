package store

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// StartEmbedded starts an in-process miniredis on a random loopback port, the
// store used when no REDIS_URL is set. Its state lives only in this process,
// so sessions cannot move to another gateway node; the caller should say so
// in its logs, and must Close it on shutdown.
func StartEmbedded() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: start: %w", err)
	}
	return m, nil
}
