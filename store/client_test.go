package store

import (
	"strings"
	"testing"
	"time"

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
