-- Hand a session to a person, as its owner: the hand-off goes into the
-- record (it survives a resume on any node) and its event on the timeline.
-- KEYS[1] meta hash, KEYS[2] timeline list (one hash tag: the session's).
-- ARGV[1] the writer's epoch, ARGV[2] TTL ms, ARGV[3] most timeline
-- entries kept, ARGV[4] the hand-off (JSON), ARGV[5] the timeline event.
-- Returns 1 when written; -1 or -2 from owner_check.lua (nothing written).
redis.call('HSET', KEYS[1], 'handoff', ARGV[4])
redis.call('RPUSH', KEYS[2], ARGV[5])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
