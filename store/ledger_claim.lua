-- Claim call IDs of a session before they run, in one atomic step.
-- KEYS[1] calls hash  turnstile:{sid}:calls   (call id -> JSON record)
-- KEYS[2] order list  turnstile:{sid}:callids (call ids, oldest first)
-- ARGV[1] TTL ms, ARGV[2] most calls kept, ARGV[3..] pairs: call id, claim JSON
-- Returns, per call in order, the record claimed before ('' when new).
local out = {}
for i = 3, #ARGV, 2 do
  local prev = redis.call('HGET', KEYS[1], ARGV[i])
  if prev then
    out[#out + 1] = prev
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    redis.call('RPUSH', KEYS[2], ARGV[i])
    out[#out + 1] = ''
  end
end
local excess = redis.call('LLEN', KEYS[2]) - tonumber(ARGV[2])
while excess > 0 do
  redis.call('HDEL', KEYS[1], redis.call('LPOP', KEYS[2]))
  excess = excess - 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return out
