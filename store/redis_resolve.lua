-- Answer a pending confirmation, once, only for its own user and only as
-- the session's owner.
-- KEYS[1] meta hash     turnstile:{sid}:meta
-- KEYS[2] pending key   turnstile:{sid}:confirm:<token>
-- KEYS[3] pending index turnstile:{sid}:confirms
-- ARGV[1] the writer's epoch, ARGV[2] user id, ARGV[3] token, ARGV[4] "1" to
-- approve, ARGV[5] now (unix ms), ARGV[6] approval TTL ms, ARGV[7] approval
-- key prefix turnstile:{sid}:approved:
-- Returns {status, pending JSON}: status "unknown", "expired" or "ok".
-- (owner_check.lua runs first: -1 and -2 come from it.)
local raw = redis.call('GET', KEYS[2])
if not raw then
  return {'unknown', ''}
end
local c = cjson.decode(raw)
if c['userId'] ~= ARGV[2] then
  -- Not this user's: leave it for its owner.
  return {'unknown', ''}
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[3])
if tonumber(c['expiresAtMs']) <= tonumber(ARGV[5]) then
  return {'expired', raw}
end
if ARGV[4] == '1' then
  -- The approval carries the action's idempotency key to the approved run
  -- (user ids hold no line break).
  local key = c['idempotencyKey']
  if type(key) ~= 'string' then
    key = ''
  end
  redis.call('SET', ARGV[7] .. c['tool'] .. ':' .. c['argsDigest'], ARGV[2] .. '\n' .. key, 'PX', ARGV[6])
end
return {'ok', raw}
