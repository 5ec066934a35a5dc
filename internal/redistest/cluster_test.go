package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

func TestStartClusterServesEverySlotAndCleanupStopsIt(t *testing.T) {
	var c *Cluster
	t.Run("running", func(t *testing.T) {
		c = StartCluster(t)
		if len(c.Addrs) != 3 {
			t.Fatalf("%d masters, want 3", len(c.Addrs))
		}
		opt, err := redis.ParseClusterURL(c.URL())
		if err != nil || len(opt.Addrs) != 3 {
			t.Fatalf("URL %q: %v %v", c.URL(), opt, err)
		}
		cc := redis.NewClusterClient(opt)
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Keys of different hash tags land on different masters, and a
		// transaction across two slots is refused.
		nodes := map[string]bool{}
		for _, k := range []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"} {
			if err := cc.Set(ctx, k, "v", time.Minute).Err(); err != nil {
				t.Fatalf("SET %s: %v", k, err)
			}
			nodes[c.NodeFor(t, k)] = true
		}
		if len(nodes) < 2 {
			t.Errorf("eight hash tags all on %v: the slots are not spread", nodes)
		}
		_, err = cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "{a}")
			p.Get(ctx, "{b}")
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Errorf("cross-slot MULTI: err = %v, want CROSSSLOT", err)
		}
	})
	for _, a := range c.Addrs {
		if ping(a) == nil {
			t.Errorf("cluster node %s still answers after its test ended", a)
		}
	}
}

func TestStartSentinelFailsOverToTheReplica(t *testing.T) {
	var s *Sentinels
	t.Run("running", func(t *testing.T) {
		s = StartSentinel(t)
		if m := s.Master(t); m != s.Servers[0] {
			t.Fatalf("master %s, want the first server %s", m, s.Servers[0])
		}
		opt, err := redis.ParseFailoverURL(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		fc := redis.NewFailoverClient(opt)
		defer fc.Close()
		ctx := context.Background()
		if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := fc.Wait(ctx, 1, 2*time.Second).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT 1: %d, %v; want the replica's ack", n, err)
		}
		if m := s.Failover(t); m != s.Servers[1] {
			t.Fatalf("after failover the master is %s, want %s", m, s.Servers[1])
		}
		// The failover client follows the sentinel; the acknowledged write survived.
		var got string
		testwait.ForNil(t, "a read through the failover client", func() (err error) {
			got, err = fc.Get(ctx, "k").Result()
			return err
		})
		if got != "before" {
			t.Fatalf("GET after failover = %q, %v", got, err)
		}
		if err := fc.Set(ctx, "k", "after", 0).Err(); err != nil {
			t.Fatalf("write to the new master: %v", err)
		}
		if m := s.Failover(t); m != s.Servers[0] {
			t.Fatalf("second failover: master %s, want %s back", m, s.Servers[0])
		}
	})
	for _, a := range append(s.Servers[:], s.Sentinel) {
		if ping(a) == nil {
			t.Errorf("%s still answers after its test ended", a)
		}
	}
}
