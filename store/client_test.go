package store

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestNewRedisClientRejectsBadURLsNamingREDIS_URL(t *testing.T) {
	for _, u := range []string{
		"",
		"localhost:6379",
		"http://localhost:6379",
		"unix:///tmp/redis.sock",
		"redis://:s3cret@localhost:6379/notadb",
		"redis://:s3cret@local host:6379",
	} {
		c, err := NewRedisClient(u, time.Second)
		if err == nil {
			c.Close()
			t.Errorf("%q: accepted", u)
			continue
		}
		if !strings.Contains(err.Error(), "REDIS_URL") {
			t.Errorf("%q: error %q does not name REDIS_URL", u, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: error %q leaks the password", u, err)
		}
	}
}

func TestNewRedisClientBoundsEveryStep(t *testing.T) {
	const timeout = 250 * time.Millisecond
	c, err := NewRedisClient("rediss://user:pw@127.0.0.1:6380/2", timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("client is %T, want a single-node *redis.Client", c)
	}
	o := rc.Options()
	if o.Addr != "127.0.0.1:6380" || o.DB != 2 || o.Username != "user" || o.Password != "pw" || o.TLSConfig == nil {
		t.Errorf("URL not applied: addr %s db %d user %q tls %v", o.Addr, o.DB, o.Username, o.TLSConfig != nil)
	}
	if !o.ContextTimeoutEnabled {
		t.Error("context deadlines are ignored")
	}
	for name, d := range map[string]time.Duration{
		"dial": o.DialTimeout, "read": o.ReadTimeout, "write": o.WriteTimeout, "pool": o.PoolTimeout,
	} {
		if d <= 0 || d > timeout {
			t.Errorf("%s timeout = %v, want in (0, %v]", name, d, timeout)
		}
	}
	if o.MaxRetries != 1 {
		t.Errorf("MaxRetries = %d, want 1", o.MaxRetries)
	}
}

func TestNewRedisClientRefusesNonPositiveTimeout(t *testing.T) {
	if c, err := NewRedisClient("redis://127.0.0.1:6379", 0); err == nil {
		c.Close()
		t.Fatal("zero timeout accepted")
	}
}

func TestRedisModeURLsMapToOneClientEach(t *testing.T) {
	cases := []struct {
		mode RedisMode
		url  string
		want redis.UniversalOptions
	}{
		{RedisSingle, "rediss://user:pw@127.0.0.1:6380/2?client_name=gw",
			redis.UniversalOptions{Addrs: []string{"127.0.0.1:6380"}, DB: 2, Username: "user", Password: "pw", ClientName: "gw"}},
		{RedisCluster, "redis://:pw@h1:7000?addr=h2:7001&addr=h3:7002",
			redis.UniversalOptions{Addrs: []string{"h1:7000", "h2:7001", "h3:7002"}, IsClusterMode: true, Password: "pw"}},
		{RedisCluster, "rediss://h1:7000/0",
			redis.UniversalOptions{Addrs: []string{"h1:7000"}, IsClusterMode: true}},
		{RedisSentinel, "rediss://su:sp@s1:26379?master_name=mymaster&addr=s2:26380&password=dp&db=3",
			redis.UniversalOptions{Addrs: []string{"s1:26379", "s2:26380"}, MasterName: "mymaster", DB: 3,
				Password: "dp", SentinelUsername: "su", SentinelPassword: "sp"}},
	}
	for _, c := range cases {
		got, err := redisOptions(c.mode, c.url)
		if err != nil {
			t.Errorf("%s %s: %v", c.mode, c.url, err)
			continue
		}
		tlsOn := strings.HasPrefix(c.url, "rediss://")
		if (got.TLSConfig != nil) != tlsOn {
			t.Errorf("%s %s: TLS %v, want %v", c.mode, c.url, got.TLSConfig != nil, tlsOn)
		}
		if tlsOn && c.mode != RedisSingle && got.TLSConfig.ServerName != "" {
			t.Errorf("%s %s: TLS pinned to %q; every node must be verified by its own name", c.mode, c.url, got.TLSConfig.ServerName)
		}
		got.TLSConfig = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.mode, c.url, *got, c.want)
		}
	}
}

func TestRedisModeClientKindAndTightTimeouts(t *testing.T) {
	const timeout = 250 * time.Millisecond
	check := func(mode RedisMode, name string, dial, read, write, pool time.Duration, retries int, ctxTimeout bool) {
		t.Helper()
		for what, d := range map[string]time.Duration{"dial": dial, "read": read, "write": write, "pool": pool} {
			if d <= 0 || d > timeout {
				t.Errorf("%s (%s): %s timeout = %v, want in (0, %v]", mode, name, what, d, timeout)
			}
		}
		if retries != 1 || !ctxTimeout {
			t.Errorf("%s (%s): MaxRetries %d, ContextTimeoutEnabled %v; want 1, true", mode, name, retries, ctxTimeout)
		}
	}
	c, err := NewRedisModeClient(RedisCluster, "redis://127.0.0.1:7000?addr=127.0.0.1:7001", timeout)
	if err != nil {
		t.Fatal(err)
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("cluster mode built %T, want *redis.ClusterClient", c)
	}
	o := cc.Options()
	check(RedisCluster, "cluster client", o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.MaxRetries, o.ContextTimeoutEnabled)
	_ = c.Close()

	c, err = NewRedisModeClient(RedisSentinel, "redis://127.0.0.1:26379?master_name=m", timeout)
	if err != nil {
		t.Fatal(err)
	}
	fc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("sentinel mode built %T, want a failover *redis.Client", c)
	}
	so := fc.Options()
	check(RedisSentinel, "failover client", so.DialTimeout, so.ReadTimeout, so.WriteTimeout, so.PoolTimeout, so.MaxRetries, so.ContextTimeoutEnabled)
	_ = c.Close()
}

func TestRedisURLThatDoesNotFitTheModeNamesTheRightOne(t *testing.T) {
	cases := []struct {
		mode      RedisMode
		url       string
		wantInErr string
	}{
		{RedisSingle, "redis://:s3cret@h1:7000?addr=h2:7001", "TURNSTILE_REDIS_MODE=cluster"},
		{RedisSingle, "redis://:s3cret@s1:26379?master_name=m", "TURNSTILE_REDIS_MODE=sentinel"},
		{RedisCluster, "redis://:s3cret@s1:26379?master_name=m&addr=s2:26379", "TURNSTILE_REDIS_MODE=sentinel"},
		{RedisCluster, "redis://:s3cret@h1:7000/3", "TURNSTILE_REDIS_MODE=single"},
		{RedisSentinel, "redis://:s3cret@h1:6379/0", "master_name"},
		{RedisSentinel, "redis://:s3cret@h1:6379?master_name=", "TURNSTILE_REDIS_MODE=single"},
		{RedisCluster, "redis://:s3cret@h1:7000?read_only=true", "replicas"},
		{RedisSentinel, "redis://:s3cret@s1:26379?master_name=m&replica_only=true", "master"},
		{RedisSingle, "redis://:s3cret@h1:6379?bogus=1", "REDIS_URL"},
		{RedisCluster, "redis://:s3cret@h1:7000?bogus=1", "REDIS_URL"},
		{RedisSentinel, "redis://:s3cret@s1:26379?master_name=m&password=s3cret&bogus=1", "REDIS_URL"},
		{RedisCluster, "redis://:s3cret@h1:7000?addr=no-port", "REDIS_URL"},
		{RedisSentinel, "http://:s3cret@s1:26379?master_name=m", "REDIS_URL"},
		{RedisCluster, "redis://:s3cret@local host:7000", "REDIS_URL"},
	}
	for _, c := range cases {
		cl, err := NewRedisModeClient(c.mode, c.url, time.Second)
		if err == nil {
			cl.Close()
			t.Errorf("%s %q: accepted", c.mode, c.url)
			continue
		}
		if !strings.Contains(err.Error(), c.wantInErr) {
			t.Errorf("%s %q: error %q does not say %q", c.mode, c.url, err, c.wantInErr)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s %q: error %q leaks the password", c.mode, c.url, err)
		}
		if CheckRedisURL(c.mode, c.url) == nil {
			t.Errorf("%s %q: CheckRedisURL accepts what the client refuses", c.mode, c.url)
		}
	}
}

func TestParseRedisMode(t *testing.T) {
	for in, want := range map[string]RedisMode{"": RedisSingle, "single": RedisSingle, " Cluster ": RedisCluster, "SENTINEL": RedisSentinel} {
		if got, err := ParseRedisMode(in); err != nil || got != want {
			t.Errorf("ParseRedisMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseRedisMode("ring"); err == nil {
		t.Error("ring accepted")
	}
	if DefaultWaitReplicas(RedisSingle) != 0 || DefaultWaitReplicas(RedisCluster) != 1 || DefaultWaitReplicas(RedisSentinel) != 1 {
		t.Error("WAIT defaults: want 0 single, 1 cluster and sentinel")
	}
}

// The client's small connection buffers (connBufferSize, pipelineBufferSize)
// must not limit what the store writes or reads: a value several times their
// size goes through a command and a pipeline and comes back whole.
func TestRedisClientCarriesValuesLargerThanItsBuffers(t *testing.T) {
	mr := miniredis.RunT(t)
	c, err := NewRedisClient("redis://"+mr.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	big := strings.Repeat("0123456789abcdef", 4*pipelineBufferSize/16)
	if err := c.Set(ctx, "one", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "two", big+big, 0)
		p.Set(ctx, "three", "small", 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"one": big, "two": big + big, "three": "small"} {
		got, err := c.Get(ctx, key).Result()
		if err != nil || got != want {
			t.Errorf("%s: got %d bytes (err %v), want %d", key, len(got), err, len(want))
		}
	}
	vals, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "one")
		p.Get(ctx, "two")
		return nil
	})
	if err != nil || len(vals) != 2 || vals[1].(*redis.StringCmd).Val() != big+big {
		t.Errorf("pipelined reads of %d and %d bytes failed: %v", len(big), 2*len(big), err)
	}
}
