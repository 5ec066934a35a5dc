package gateway

import (
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/store"
)

func TestRedisModeSettingReadsTheURLInThatMode(t *testing.T) {
	cases := []struct {
		env      map[string]string
		wantMode store.RedisMode
		wantWait int
	}{
		{map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/1"}, store.RedisSingle, 0},
		{map[string]string{"TURNSTILE_REDIS_MODE": "cluster", "REDIS_URL": "redis://:pw@h1:7000?addr=h2:7001&addr=h3:7002"},
			store.RedisCluster, 1},
		{map[string]string{"TURNSTILE_REDIS_MODE": "sentinel", "REDIS_URL": "rediss://s1:26379?master_name=main&addr=s2:26379"},
			store.RedisSentinel, 1},
		{map[string]string{"TURNSTILE_REDIS_MODE": "sentinel", "TURNSTILE_REDIS_WAIT_REPLICAS": "0",
			"REDIS_URL": "redis://s1:26379?master_name=main"}, store.RedisSentinel, 0},
		{map[string]string{"TURNSTILE_REDIS_WAIT_REPLICAS": "2", "REDIS_URL": "redis://127.0.0.1:6379"}, store.RedisSingle, 2},
	}
	for _, c := range cases {
		cfg, err := loadTestConfig(t, nil, c.env)
		if err != nil {
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		if cfg.RedisMode != c.wantMode || cfg.RedisWaitReplicas != c.wantWait {
			t.Errorf("%v: mode %q wait %d, want %q %d", c.env, cfg.RedisMode, cfg.RedisWaitReplicas, c.wantMode, c.wantWait)
		}
	}
	// The flag twins.
	cfg, err := loadTestConfig(t, []string{"-redis-mode", "cluster", "-redis-wait-replicas", "3",
		"-redis-url", "redis://h1:7000"}, nil)
	if err != nil || cfg.RedisMode != store.RedisCluster || cfg.RedisWaitReplicas != 3 {
		t.Errorf("flags: %+v, %v", cfg, err)
	}
}

func TestRedisSettingsThatDoNotFitAreRefusedNamingTheFix(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"REDIS_URL": "redis://:s3cret@h1:7000?addr=h2:7001"},
			[]string{"REDIS_URL=", "TURNSTILE_REDIS_MODE=cluster"}},
		{map[string]string{"TURNSTILE_REDIS_MODE": "sentinel", "REDIS_URL": "redis://:s3cret@h1:6379/0"},
			[]string{"REDIS_URL=", "master_name"}},
		{map[string]string{"TURNSTILE_REDIS_MODE": "cluster", "REDIS_URL": "redis://:s3cret@s1:26379?master_name=m"},
			[]string{"REDIS_URL=", "TURNSTILE_REDIS_MODE=sentinel"}},
		{map[string]string{"TURNSTILE_REDIS_MODE": "ring"}, []string{"TURNSTILE_REDIS_MODE=ring: must be single, cluster or sentinel"}},
		{map[string]string{"TURNSTILE_REDIS_MODE": "cluster"}, []string{"TURNSTILE_REDIS_MODE=cluster: needs REDIS_URL"}},
		{map[string]string{"TURNSTILE_REDIS_WAIT_REPLICAS": "1"}, []string{"TURNSTILE_REDIS_WAIT_REPLICAS=1: needs REDIS_URL"}},
		{map[string]string{"TURNSTILE_REDIS_WAIT_REPLICAS": "-1", "REDIS_URL": "redis://h:1"},
			[]string{"TURNSTILE_REDIS_WAIT_REPLICAS=-1: must be between 0 and 16"}},
		{map[string]string{"TURNSTILE_REDIS_WAIT_REPLICAS": "one", "REDIS_URL": "redis://h:1"},
			[]string{"TURNSTILE_REDIS_WAIT_REPLICAS=one: not a whole number"}},
	}
	for _, c := range cases {
		_, err := loadTestConfig(t, nil, c.env)
		if err == nil {
			t.Errorf("%v: accepted", c.env)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error does not say %q:\n%v", c.env, w, err)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: error shows the password:\n%v", c.env, err)
		}
		if n := len(strings.Split(strings.TrimSpace(err.Error()), "\n")); n != 1 {
			t.Errorf("%v: %d problem lines, want 1:\n%v", c.env, n, err)
		}
	}
}
