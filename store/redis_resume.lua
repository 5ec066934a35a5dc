-- Take ownership of a session: check the resume token's digest and the
-- user, take the next epoch (every write of an older owner is refused from
-- now on), refresh the TTLs, announce the new owner, and return the record
-- and history as of this moment, all in one atomic step.
-- KEYS[1] meta hash, KEYS[2] history list (the session's hash tag).
-- ARGV[1] token digest, ARGV[2] user, ARGV[3] TTL ms, ARGV[4] the owners
-- channel, ARGV[5] session id.
-- Returns nil when refused (unknown session, wrong token, other user, or a
-- session an operator closed: nothing is touched), else {meta field/value pairs, history entries}.
-- The digests compared are SHA-256 of the token: timing reveals nothing an
-- attacker could turn into a token.
local m = redis.call('HMGET', KEYS[1], 'tokenHash', 'user', 'closed')
if not m[1] or m[1] ~= ARGV[1] or not m[2] or m[2] ~= ARGV[2] or m[3] then
  return false
end
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], epoch .. ' ' .. ARGV[5])
return {redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], 0, -1)}
