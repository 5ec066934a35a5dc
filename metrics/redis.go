package metrics

import "time"

// RedisOp is one kind of session-store operation, the op label of
// turnstile_redis_duration_seconds and turnstile_redis_errors_total: what
// store.RedisStore reports to its Observe hook. A closed set: one of the
// constants, declared here (the store sits above this package) and used by
// the store for every call it makes.
type RedisOp string

const (
	RedisCreate       RedisOp = "create"
	RedisResume       RedisOp = "resume"
	RedisLoad         RedisOp = "load"
	RedisAppend       RedisOp = "append"
	RedisRestore      RedisOp = "restore"
	RedisTurns        RedisOp = "turns"
	RedisWatch        RedisOp = "watch"
	RedisEpochs       RedisOp = "epochs"
	RedisPing         RedisOp = "ping"
	RedisLedger       RedisOp = "ledger"
	RedisConfirm      RedisOp = "confirm"
	RedisBlock        RedisOp = "block"
	RedisLeaseAcquire RedisOp = "lease_acquire"
	RedisLeaseRenew   RedisOp = "lease_renew"
	RedisLeaseRelease RedisOp = "lease_release"
	RedisLeaseCount   RedisOp = "lease_count"
	RedisLeave        RedisOp = "leave"
	RedisLive         RedisOp = "live"
	RedisTimeline     RedisOp = "timeline"
	RedisOperator     RedisOp = "operator"
	RedisCooldown     RedisOp = "cooldown"   // abuse cooldowns (a 4008 for rate abuse; checked before each upgrade)
	RedisHandoff      RedisOp = "handoff"    // a session handed to a person (request_human)
	RedisCallStart    RedisOp = "call_start" // a phone call's signed stream start used once (a replay is refused)
)

// RedisOps is the closed set of RedisOp.
var RedisOps = []RedisOp{RedisCreate, RedisResume, RedisLoad, RedisAppend, RedisRestore, RedisTurns, RedisWatch,
	RedisEpochs, RedisPing, RedisLedger, RedisConfirm, RedisBlock, RedisLeaseAcquire, RedisLeaseRenew,
	RedisLeaseRelease, RedisLeaseCount, RedisLeave, RedisLive, RedisTimeline, RedisOperator, RedisCooldown,
	RedisHandoff, RedisCallStart}

// ObserveRedis records one session-store operation; it has the shape the
// store's Observe hook wants.
func (m *Metrics) ObserveRedis(op RedisOp, d time.Duration, err error) {
	m.RedisDuration.WithLabelValues(string(op)).Observe(d.Seconds())
	if err != nil {
		m.RedisErrors.WithLabelValues(string(op)).Inc()
	}
}
