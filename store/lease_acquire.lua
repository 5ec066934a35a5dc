-- Admit one holder (a connection of a user, a stream of a call) under a limit,
-- counting only live leases, in one atomic step.
-- KEYS[1] the lease group (turnstile:user:{<user>}:conns, turnstile:call:{<sid>}:streams)
--         sorted set: member = holder id,
--         score = when its lease expires (Unix ms)
-- ARGV[1] now (Unix ms), ARGV[2] the new lease's expiry (Unix ms),
-- ARGV[3] the limit, ARGV[4] the holder id
-- Returns {1 admitted | 0 refused, live leases before this one}.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[3]) then
  return {0, n}
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return {1, n}
