-- An operator ends a session: from now on a resume is refused, the action
-- is on the session's timeline, and the node holding the session closes
-- its connection (the announcement on the owners channel), all in one
-- atomic step.
-- KEYS[1] meta hash, KEYS[2] timeline list (the session's hash tag).
-- ARGV[1] who closed it and why (kept in the record), ARGV[2] the owners
-- channel, ARGV[3] session id, ARGV[4] the timeline event (JSON),
-- ARGV[5] most timeline entries kept.
-- Returns 0 when there is no such session, else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'closed', ARGV[1])
return announce(ARGV[2], 'close ' .. ARGV[3], ARGV[4], ARGV[5])
