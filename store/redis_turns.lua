-- Count one turn of a user against a sliding window, across every node.
-- KEYS[1] turns sorted set turnstile:user:{<user>}:turns (the user's hash tag)
-- ARGV[1] now (unix ms), ARGV[2] window ms, ARGV[3] most turns per window,
-- ARGV[4] a member naming the turn (session id and turn number).
-- Returns {1, 0} when the turn is allowed (and counted), {0, ms} when
-- refused (not counted), ms being how long until a turn is allowed again.
local now, window, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= max then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local wait = window
  if oldest[2] then
    wait = tonumber(oldest[2]) + window - now
  end
  return {0, wait}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return {1, 0}
