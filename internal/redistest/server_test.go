package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerRestartsEmptyOnTheSameAddress(t *testing.T) {
	var s *Server
	t.Run("running", func(t *testing.T) {
		s = StartServer(t)
		addr := s.Addr
		ctx := context.Background()
		set := func() error {
			return with(addr, func(c *redis.Client) error { return c.Set(ctx, "k", "v", time.Minute).Err() })
		}
		if err := set(); err != nil {
			t.Fatal(err)
		}
		s.Stop()
		if err := ping(addr); err == nil {
			t.Fatal("the stopped server answers PING")
		}
		s.Restart()
		if s.Addr != addr {
			t.Fatalf("restarted on %s, want %s", s.Addr, addr)
		}
		err := with(addr, func(c *redis.Client) error { return c.Get(ctx, "k").Err() })
		if !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after the restart: %v, want nil (the server comes back empty)", err)
		}
	})
	if err := ping(s.Addr); err == nil {
		t.Fatalf("server at %s still answers after its test ended", s.Addr)
	}
}
