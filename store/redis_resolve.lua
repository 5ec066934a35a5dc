-- Answer a pending confirmation, once, and only for its own user.
-- KEYS[1] pending key   turnstile:{sid}:confirm:<token>
-- KEYS[2] pending index turnstile:{sid}:confirms
-- ARGV[1] user id, ARGV[2] token, ARGV[3] "1" to approve, ARGV[4] now (unix ms),
-- ARGV[5] approval TTL ms, ARGV[6] approval key prefix turnstile:{sid}:approved:
-- Returns {status, pending JSON}: status "unknown", "expired" or "ok".
local raw = redis.call('GET', KEYS[1])
if not raw then
  return {'unknown', ''}
end
local c = cjson.decode(raw)
if c['userId'] ~= ARGV[1] then
  -- Not this user's: leave it for its owner.
  return {'unknown', ''}
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
if tonumber(c['expiresAtMs']) <= tonumber(ARGV[4]) then
  return {'expired', raw}
end
if ARGV[3] == '1' then
  redis.call('SET', ARGV[6] .. c['tool'] .. ':' .. c['argsDigest'], ARGV[1], 'PX', ARGV[5])
end
return {'ok', raw}
