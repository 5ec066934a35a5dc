package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/turnstile-gw/turnstile/internal/settings"
)

// redisDurability asks the Redis of REDIS_URL, once at startup, whether a
// restart would lose what it holds: no AOF (appendonly no), no RDB
// snapshots (save ""), and no replica to fail over to. It returns the
// warning to show on /readyz, "" when Redis keeps its data one of those
// ways or cannot be asked (a managed Redis that refuses CONFIG, a user
// without @admin: logged, not guessed).
func redisDurability(ctx context.Context, cfg Config, rdb redis.UniversalClient, log *slog.Logger) string {
	if cfg.RedisURL == "" {
		return "" // the embedded miniredis says so itself
	}
	ctx, cancel := context.WithTimeout(ctx, redisCheckTimeoutFactor*cfg.RedisTimeout)
	defer cancel()
	aof, err := rdb.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		log.Info("could not check Redis persistence (CONFIG GET refused or failed); make sure it has AOF, RDB or a replica",
			"err", err)
		return ""
	}
	save, err := rdb.ConfigGet(ctx, "save").Result()
	if err != nil {
		log.Info("could not check Redis persistence (CONFIG GET refused or failed)", "err", err)
		return ""
	}
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		log.Info("could not check Redis replication (INFO refused or failed)", "err", err)
		return ""
	}
	replicas := infoInt(info, "connected_slaves")
	if aof["appendonly"] == "yes" || strings.TrimSpace(save["save"]) != "" || replicas > 0 {
		log.Info("redis durability", "appendonly", aof["appendonly"], "save", save["save"], "replicas", replicas)
		return ""
	}
	msg := fmt.Sprintf("Redis at %s has no persistence (appendonly no, save \"\") and no replica: if it restarts, "+
		"every session is lost except those this node serves now or served in the last TURNSTILE_IDLE_TIMEOUT; "+
		"turn on AOF (CONFIG SET appendonly yes) or RDB snapshots, or add a replica: see docs/operations.md "+
		"(Redis persistence)", settings.RedactURL(string(cfg.RedisURL)))
	log.Warn("REDIS WITHOUT PERSISTENCE: " + msg)
	return msg
}

// infoInt reads the integer field name of an INFO section's text; 0 when
// absent.
func infoInt(info, name string) int {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
