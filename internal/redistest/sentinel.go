package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the sentinel of StartSentinel monitors.
const SentinelMaster = "turnstile"

// Sentinels is a master, one replica and a redis-sentinel watching them,
// on loopback, owned by one test.
type Sentinels struct {
	// Sentinel is the sentinel's host:port.
	Sentinel string
	// Servers are the two data servers' host:port: the master first, as
	// started (a failover swaps their roles).
	Servers [2]string
}

// URL is the set in go-redis's ParseFailoverURL form (the
// TURNSTILE_REDIS_MODE=sentinel REDIS_URL).
func (s *Sentinels) URL() string {
	return "redis://" + s.Sentinel + "?master_name=" + SentinelMaster
}

// StartSentinel runs a redis-server master, a redis-server replica of it
// and a redis-sentinel monitoring it as SentinelMaster (quorum 1, down after
// 1 s), on free loopback ports, and waits until the replica is in sync and
// the sentinel knows it (so that a failover has a replica to promote). All
// three are killed when the test ends. It fails the test when redis-server
// or redis-sentinel is not installed.
func StartSentinel(t testing.TB) *Sentinels {
	t.Helper()
	bin := lookPath(t, "redis-server", "redis-server")
	sentinelBin := lookPath(t, "redis-sentinel", "redis-sentinel")
	s := &Sentinels{}
	for i := range s.Servers {
		dir := filepath.Join(t.TempDir(), "server"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		err := retry(func() error {
			port, err := freePort()
			if err != nil {
				return err
			}
			var extra []string
			if i == 1 {
				host, p := splitAddr(s.Servers[0])
				extra = []string{"--replicaof", host, p}
			}
			s.Servers[i] = loopback(port)
			return launch(t, bin, serverArgs(port, dir, extra...), s.Servers[i], dir)
		})
		if err != nil {
			t.Fatalf("redistest: sentinel set, server %d: %v", i, err)
		}
	}
	if err := poll("replica "+s.Servers[1]+" in sync", func(ctx context.Context) error {
		return replicaInSync(ctx, s.Servers[1])
	}); err != nil {
		t.Fatalf("redistest: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "sentinel")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	err := retry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		host, masterPort := splitAddr(s.Servers[0])
		// The sentinel rewrites its config file, so it gets its own.
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n"+
			"sentinel monitor %s %s %s 1\n"+
			"sentinel down-after-milliseconds %[3]s 1000\n"+
			"sentinel failover-timeout %[3]s 10000\n"+
			"sentinel parallel-syncs %[3]s 1\n", port, dir, SentinelMaster, host, masterPort)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return err
		}
		s.Sentinel = loopback(port)
		return launch(t, sentinelBin, []string{conf}, s.Sentinel, dir)
	})
	if err != nil {
		t.Fatalf("redistest: redis-sentinel: %v", err)
	}
	if err := poll("the sentinel knows a replica to promote", s.replicaKnown); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// Master returns the master's address as the sentinel reports it.
func (s *Sentinels) Master(t testing.TB) string {
	t.Helper()
	var addr string
	err := withSentinel(s.Sentinel, func(c *redis.SentinelClient) error {
		got, err := c.GetMasterAddrByName(context.Background(), SentinelMaster).Result()
		if err != nil {
			return err
		}
		addr = loopback(atoi(got[1]))
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME: %v", err)
	}
	return addr
}

// Failover makes the sentinel promote the replica now and waits until the
// set is whole again (BeginFailover, then AwaitFailover). It returns the
// new master.
func (s *Sentinels) Failover(t testing.TB) string {
	t.Helper()
	promoted := s.BeginFailover(t)
	s.AwaitFailover(t, promoted)
	return promoted
}

// BeginFailover sends SENTINEL FAILOVER and returns at once, with the
// address of the server that is being promoted: the failover goes on in
// the sentinel while the caller keeps working.
func (s *Sentinels) BeginFailover(t testing.TB) string {
	t.Helper()
	// After an earlier failover the sentinel needs a moment to list the
	// former master as a replica it may promote.
	if err := poll("the sentinel knows a replica to promote", s.replicaKnown); err != nil {
		t.Fatalf("redistest: before SENTINEL FAILOVER: %v", err)
	}
	old := s.Master(t)
	err := withSentinel(s.Sentinel, func(c *redis.SentinelClient) error {
		return c.Failover(context.Background(), SentinelMaster).Err()
	})
	if err != nil {
		t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	if old == s.Servers[0] {
		return s.Servers[1]
	}
	return s.Servers[0]
}

// AwaitFailover waits until promoted is a master and the sentinel reports
// it; then it points the former master at the new one (REPLICAOF, as the
// sentinel itself does only 10 to 20 s later) and waits until it is in
// sync, so that WAIT has a replica again.
func (s *Sentinels) AwaitFailover(t testing.TB, promoted string) {
	t.Helper()
	old := s.Servers[0]
	if promoted == s.Servers[0] {
		old = s.Servers[1]
	}
	host, port := splitAddr(promoted)
	steps := []struct {
		what string
		cond func(ctx context.Context) error
	}{
		{"the sentinel reports " + promoted + " as master", func(ctx context.Context) error {
			if m := s.Master(t); m != promoted {
				return fmt.Errorf("%w: master is %s", errNotYet, m)
			}
			return nil
		}},
		{promoted + " is a master", func(ctx context.Context) error {
			return with(promoted, func(c *redis.Client) error {
				info, err := c.Info(ctx, "replication").Result()
				if err != nil {
					return err
				}
				if !strings.Contains(info, "role:master") {
					return fmt.Errorf("%w: %s", errNotYet, info)
				}
				return nil
			})
		}},
		{"former master " + old + " replicates " + promoted, func(ctx context.Context) error {
			return with(old, func(c *redis.Client) error { return c.ReplicaOf(ctx, host, port).Err() })
		}},
		{"former master " + old + " in sync", func(ctx context.Context) error { return replicaInSync(ctx, old) }},
	}
	for _, st := range steps {
		if err := poll(st.what, st.cond); err != nil {
			t.Fatalf("redistest: after SENTINEL FAILOVER: %v", err)
		}
	}
}

// replicaKnown holds once the sentinel lists a healthy replica of the
// master.
func (s *Sentinels) replicaKnown(ctx context.Context) error {
	return withSentinel(s.Sentinel, func(c *redis.SentinelClient) error {
		replicas, err := c.Replicas(ctx, SentinelMaster).Result()
		if err != nil {
			return err
		}
		for _, r := range replicas {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" {
				return nil
			}
		}
		return fmt.Errorf("%w: replicas %v", errNotYet, replicas)
	})
}

// replicaInSync holds once addr is a replica whose link to its master is
// up and not syncing.
func replicaInSync(ctx context.Context, addr string) error {
	return with(addr, func(c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") ||
			!strings.Contains(info, "master_sync_in_progress:0") {
			return fmt.Errorf("%w: %s", errNotYet, strings.Join(strings.Fields(info), " "))
		}
		return nil
	})
}

// withSentinel runs fn on a short-lived client of a sentinel.
func withSentinel(addr string, fn func(c *redis.SentinelClient) error) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return fn(c)
}

func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
