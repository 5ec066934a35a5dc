-- Count a session's stored history against its user's storage quota, across
-- every node and session of the user, in one atomic step.
-- KEYS[1] the user's storage hash turnstile:user:{<user>}:storage (field
-- 'total', and per session 's:<id>' the bytes counted for it), KEYS[2] the
-- sorted set turnstile:user:{<user>}:storage:expiry (session id, scored by
-- when its keys expire, unix ms). Both on the user's hash tag.
-- ARGV[1] now (unix ms), ARGV[2] the session TTL ms, ARGV[3] session id,
-- ARGV[4] 'add' (ARGV[5] bytes appended) or 'set' (ARGV[5] the session's
-- bytes, when it was written back whole), ARGV[6] most bytes one session
-- keeps (its history bound), ARGV[7] the quota ('0': none), ARGV[8] '1' to
-- refuse a new turn's entry that the quota has no room for (nothing is then
-- counted; the caller takes the entry back).
-- Returns {1, total} when counted, {0, total} when refused.
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0') or 0
-- Forget the sessions whose keys have expired by now (a few per call, so
-- that a call stays short whatever the backlog).
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 64)
for _, id in ipairs(gone) do
  total = total - (tonumber(redis.call('HGET', KEYS[1], 's:' .. id) or '0') or 0)
  redis.call('HDEL', KEYS[1], 's:' .. id)
  redis.call('ZREM', KEYS[2], id)
end
if total < 0 then
  total = 0
end
local field = 's:' .. ARGV[3]
local cur = tonumber(redis.call('HGET', KEYS[1], field) or '0') or 0
local n, cap, quota = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if ARGV[4] == 'add' then
  n = cur + n
end
if n > cap then
  n = cap
end
if n < 0 then
  n = 0
end
local allowed = 1
if ARGV[8] == '1' and quota > 0 and (total >= quota or total - cur + n > quota) then
  allowed, n = 0, cur
end
total = total - cur + n
redis.call('HSET', KEYS[1], 'total', total, field, n)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return {allowed, total}
