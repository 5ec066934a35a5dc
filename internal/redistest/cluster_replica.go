package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// AddReplica runs one more cluster node on free loopback ports, makes it a
// replica of master (one of c.Addrs), and waits until it is in sync, knows
// the whole cluster (serves READONLY reads) and acknowledges the master's
// writes, so that a WAIT 1 on that master is acknowledged. It sets the
// master's repl-diskless-sync-delay to 0 (sync at once). c.Addrs (the
// masters) does not change. The node is killed when the test ends.
func (c *Cluster) AddReplica(t testing.TB, master string) string {
	t.Helper()
	bin := lookPath(t, "redis-server", "redis-server")
	dir := t.TempDir()
	addr, err := startClusterNode(t, bin, dir)
	if err != nil {
		t.Fatalf("redistest: cluster replica: %v", err)
	}

	// The master's node id and cluster bus port, from its own line of
	// CLUSTER NODES: "<id> <ip>:<port>@<bus>[,<hostname>] myself,master …".
	var id, busPort string
	err = poll("CLUSTER NODES on "+master, func(ctx context.Context) error {
		return with(master, func(rc *redis.Client) error {
			nodes, err := rc.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(nodes, "\n") {
				f := strings.Fields(line)
				if len(f) < 3 || !strings.Contains(f[2], "myself") {
					continue
				}
				_, bus, ok := strings.Cut(f[1], "@")
				if !ok {
					return fmt.Errorf("no bus port in %q", line)
				}
				bus, _, _ = strings.Cut(bus, ",")
				id, busPort = f[0], bus
				return nil
			}
			return fmt.Errorf("%w: no myself line in %q", errNotYet, nodes)
		})
	})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	host, port := splitAddr(master)
	steps := []struct {
		what string
		cond func(ctx context.Context) error
	}{
		{addr + " meets " + master, func(ctx context.Context) error {
			return with(addr, func(rc *redis.Client) error {
				return rc.Do(ctx, "CLUSTER", "MEET", host, port, busPort).Err()
			})
		}},
		// The master would otherwise wait 5 s for more replicas before
		// it sends the first one its data.
		{master + " syncs replicas at once", func(ctx context.Context) error {
			return with(master, func(rc *redis.Client) error {
				return rc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
			})
		}},
		// CLUSTER REPLICATE is refused until the handshake is over and
		// the new node knows the master by its id.
		{addr + " replicates " + master, func(ctx context.Context) error {
			return with(addr, func(rc *redis.Client) error { return rc.ClusterReplicate(ctx, id).Err() })
		}},
		{"replica " + addr + " in sync", func(ctx context.Context) error { return replicaInSync(ctx, addr) }},
		// Until it has heard of every slot's master it answers CLUSTERDOWN.
		{"cluster_state:ok on " + addr, func(ctx context.Context) error {
			return with(addr, func(rc *redis.Client) error {
				info, err := rc.ClusterInfo(ctx).Result()
				if err != nil {
					return err
				}
				if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
					return fmt.Errorf("%w: %s", errNotYet, strings.Join(strings.Fields(info)[:4], " "))
				}
				return nil
			})
		}},
		// In sync and listed online is not enough: after a diskless sync
		// the master streams nothing to the replica until its first ACK,
		// which may come a second later; until then a WAIT times out.
		{"a write on " + master + " acknowledged by all its replicas", func(ctx context.Context) error {
			return with(master, func(rc *redis.Client) error { return writeAcknowledged(ctx, rc, addr) })
		}},
	}
	for _, st := range steps {
		if err := poll(st.what, st.cond); err != nil {
			t.Fatalf("redistest: cluster replica: %v", err)
		}
	}
	return addr
}

// writeAcknowledged writes (and deletes) a key of one of master's slots and
// WAITs on that connection for every replica master lists, the one at
// replica among them.
func writeAcknowledged(ctx context.Context, master *redis.Client, replica string) error {
	info, err := master.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	_, p := splitAddr(replica)
	replicas, listed := 0, false
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ":ip=") {
			replicas++
			listed = listed || strings.Contains(line, ",port="+p+",")
		}
	}
	if !listed {
		return fmt.Errorf("%w: %s does not list %s: %s", errNotYet, master.Options().Addr, replica,
			strings.Join(strings.Fields(info), " "))
	}
	conn := master.Conn()
	defer conn.Close()
	// A third of all keys are on this master; the others are MOVED.
	for i := 0; ; i++ {
		key := "redistest:replica-ready:{" + strconv.Itoa(i) + "}"
		err := conn.Set(ctx, key, "1", time.Minute).Err()
		if err == nil {
			if err := conn.Del(ctx, key).Err(); err != nil {
				return err
			}
			break
		}
		if !strings.HasPrefix(err.Error(), "MOVED") || i >= 1000 {
			return err
		}
	}
	n, err := conn.Wait(ctx, replicas, 500*time.Millisecond).Result()
	if err != nil {
		return err
	}
	if int(n) < replicas {
		return fmt.Errorf("%w: WAIT %d: %d acknowledged", errNotYet, replicas, n)
	}
	return nil
}
