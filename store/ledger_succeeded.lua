-- The record of a session's first successful call with an idempotency key
-- (ledger_answer.lua keeps 'k:<key>' → call id). Read-only.
-- KEYS[1] calls hash turnstile:{sid}:calls
-- ARGV[1] the key
-- Returns the call's record JSON, or false when there is none.
local id = redis.call('HGET', KEYS[1], 'k:' .. ARGV[1])
if not id then
  return false
end
return redis.call('HGET', KEYS[1], id)
