-- An operator (or the help desk) hands a session back to the model: the
-- hand-off leaves the record, the action goes on the timeline, and the
-- node holding the session hears it (the owners channel), in one atomic
-- step.
-- KEYS[1] meta hash, KEYS[2] timeline list (the session's hash tag).
-- ARGV[1] the owners channel, ARGV[2] session id, ARGV[3] the timeline
-- event (JSON), ARGV[4] most timeline entries kept.
-- Returns 0 when there is no such session, 2 when it is not handed off,
-- else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local h = redis.call('HGET', KEYS[1], 'handoff')
if not h or h == '' then
  return 2
end
redis.call('HDEL', KEYS[1], 'handoff')
return announce(ARGV[1], 'handback ' .. ARGV[2], ARGV[3], ARGV[4])
