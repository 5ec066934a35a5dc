package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterMasters is the size of the clusters StartCluster builds: three
// masters, the smallest Redis Cluster redis-cli accepts, so that keys of
// different hash tags really live on different servers.
const clusterMasters = 3

// Cluster is a Redis Cluster of three masters (no replicas) on loopback,
// owned by one test.
type Cluster struct {
	// Addrs are the masters' host:port.
	Addrs []string
}

// URL is the cluster in go-redis's ParseClusterURL form (the
// TURNSTILE_REDIS_MODE=cluster REDIS_URL): the first node, the others as
// addr= parameters.
func (c *Cluster) URL() string {
	u := "redis://" + c.Addrs[0]
	for i, a := range c.Addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// StartCluster runs three redis-server nodes with --cluster-enabled yes on
// free loopback ports (their cluster bus ports too), joins them with
// redis-cli --cluster create, and waits until every node reports
// cluster_state:ok with all 16384 slots assigned. The nodes are killed when
// the test ends. It fails the test when redis-server or redis-cli is not
// installed.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := lookPath(t, "redis-server", "redis-server")
	cli := lookPath(t, "redis-cli", "redis-tools")
	c := &Cluster{}
	for i := range clusterMasters {
		dir := filepath.Join(t.TempDir(), "node"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		addr, err := startClusterNode(t, bin, dir)
		if err != nil {
			t.Fatalf("redistest: cluster node %d: %v", i, err)
		}
		c.Addrs = append(c.Addrs, addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range c.Addrs {
		err := poll("cluster_state:ok on "+a, func(ctx context.Context) error {
			return with(a, func(rc *redis.Client) error {
				info, err := rc.ClusterInfo(ctx).Result()
				if err != nil {
					return err
				}
				if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") ||
					!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(clusterMasters)) {
					return fmt.Errorf("%w: %s", errNotYet, strings.Join(strings.Fields(info)[:4], " "))
				}
				return nil
			})
		})
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	return c
}

// NodeFor returns the address of the master that holds key's slot.
func (c *Cluster) NodeFor(t testing.TB, key string) string {
	t.Helper()
	var slot int64
	err := with(c.Addrs[0], func(rc *redis.Client) error {
		var err error
		slot, err = rc.ClusterKeySlot(context.Background(), key).Result()
		return err
	})
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT: %v", err)
	}
	var node string
	err = with(c.Addrs[0], func(rc *redis.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		shards, err := rc.ClusterShards(ctx).Result()
		if err != nil {
			return err
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					for _, n := range sh.Nodes {
						if n.Role == "master" {
							node = loopback(int(n.Port))
							return nil
						}
					}
				}
			}
		}
		return fmt.Errorf("slot %d is not assigned", slot)
	})
	if err != nil {
		t.Fatalf("redistest: CLUSTER SLOTS: %v", err)
	}
	return node
}

// startClusterNode runs one cluster-enabled redis-server in dir on free
// loopback ports (client and bus) and returns its address.
func startClusterNode(t testing.TB, bin, dir string) (string, error) {
	var addr string
	err := retry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		bus, err := freePort()
		if err != nil {
			return err
		}
		addr = loopback(port)
		return launch(t, bin, serverArgs(port, dir,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "2000"), addr, dir)
	})
	return addr, err
}
