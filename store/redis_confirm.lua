-- Consume an approval for exactly this call, or store a pending confirmation.
-- KEYS[1] approval key  turnstile:{sid}:approved:<tool>:<digest>
-- KEYS[2] pending key   turnstile:{sid}:confirm:<token>
-- KEYS[3] pending index turnstile:{sid}:confirms
-- ARGV[1] user id, ARGV[2] pending JSON, ARGV[3] pending TTL ms, ARGV[4] token
-- Returns 1 when an approval was consumed, 0 when a confirmation is pending.
local approver = redis.call('GET', KEYS[1])
if approver and approver == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 0
