-- Consume an approval for exactly this call, or store a pending confirmation,
-- as the session's owner.
-- KEYS[1] meta hash     turnstile:{sid}:meta
-- KEYS[2] approval key  turnstile:{sid}:approved:<tool>:<digest>
-- KEYS[3] pending key   turnstile:{sid}:confirm:<token>
-- KEYS[4] pending index turnstile:{sid}:confirms
-- ARGV[1] the writer's epoch, ARGV[2] user id, ARGV[3] pending JSON,
-- ARGV[4] pending TTL ms, ARGV[5] token
-- An approval holds "<user id>\n<idempotency key>" (the resolve script's;
-- an older one only the user id).
-- Returns {1, key} when an approval was consumed, {0, ''} when a
-- confirmation is pending; or, changing nothing, -1 when the record is gone or was written back by
-- an older owner, -2 when another connection owns the session now (a newer
-- epoch), as the append script does.
-- (owner_check.lua runs first: -1 and -2 come from it.)
local approval = redis.call('GET', KEYS[2])
if approval then
  local approver, key = approval, ''
  local sep = string.find(approval, '\n', 1, true)
  if sep then
    approver, key = string.sub(approval, 1, sep - 1), string.sub(approval, sep + 1)
  end
  if approver == ARGV[2] then
    redis.call('DEL', KEYS[2])
    return {1, key}
  end
end
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
redis.call('SADD', KEYS[4], ARGV[5])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
return {0, ''}
