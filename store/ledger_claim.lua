-- Claim call IDs of a session before they run, as its owner, in one atomic
-- step.
-- KEYS[1] meta hash   turnstile:{sid}:meta    (the owner's epoch)
-- KEYS[2] calls hash  turnstile:{sid}:calls   (call id -> JSON record)
-- KEYS[3] order list  turnstile:{sid}:callids (call ids, oldest first)
-- ARGV[1] the writer's epoch, ARGV[2] TTL ms, ARGV[3] most calls kept,
-- ARGV[4..] pairs: call id, claim JSON
-- Returns, per call in order, the record claimed before ('' when new); or,
-- writing nothing, -1 when the record is gone or was written back by an
-- older owner, -2 when another connection owns the session now (a newer
-- epoch), as the append script does.
-- (owner_check.lua runs first: -1 and -2 come from it.)
local out = {}
for i = 4, #ARGV, 2 do
  local prev = redis.call('HGET', KEYS[2], ARGV[i])
  if prev then
    out[#out + 1] = prev
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    redis.call('RPUSH', KEYS[3], ARGV[i])
    out[#out + 1] = ''
  end
end
local excess = redis.call('LLEN', KEYS[3]) - tonumber(ARGV[3])
while excess > 0 do
  redis.call('HDEL', KEYS[2], redis.call('LPOP', KEYS[3]))
  excess = excess - 1
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return out
