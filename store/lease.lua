-- Admit one holder (a connection of a user, a stream of a call) under a limit,
-- counting only live leases: prepended as a function to the scripts that take
-- a lease (lease_acquire.lua, call_start.lua; leaseScript in leases.go).
-- group: the lease group (turnstile:user:{<user>}:conns,
--        turnstile:call:{<sid>}:streams), a sorted set: member = holder id,
--        score = when its lease expires (Unix ms)
-- now, expiry: now and the new lease's expiry (Unix ms); limit: a number
-- Returns 1 admitted | 0 refused, and the live leases before this one.
local function acquire(group, now, expiry, limit, id)
  redis.call('ZREMRANGEBYSCORE', group, '-inf', now)
  local n = redis.call('ZCARD', group)
  if n >= limit then
    return 0, n
  end
  redis.call('ZADD', group, expiry, id)
  redis.call('PEXPIREAT', group, expiry)
  return 1, n
end
