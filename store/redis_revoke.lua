-- Withdraw an unused approval of this user for exactly this call, as the
-- session's owner (an approval the model was never told of: it came while a
-- person had the conversation).
-- KEYS[1] meta hash     turnstile:{sid}:meta
-- KEYS[2] approval key  turnstile:{sid}:approved:<tool>:<digest>
-- ARGV[1] the writer's epoch, ARGV[2] user id
-- Returns 1 when an approval was withdrawn, 0 when there was none of this
-- user's.
-- (owner_check.lua runs first: -1 and -2 come from it.)
local approval = redis.call('GET', KEYS[2])
if not approval then
  return 0
end
local approver = approval
local sep = string.find(approval, '\n', 1, true)
if sep then
  approver = string.sub(approval, 1, sep - 1)
end
if approver ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
