-- Add entries to a session's timeline as its owner, keeping the newest.
-- KEYS[1] meta hash, KEYS[2] timeline list (one hash tag: the session's).
-- ARGV[1] the writer's epoch, ARGV[2] TTL ms, ARGV[3] most entries kept,
-- then the entries (JSON), oldest first.
-- Returns 1 when written; -1 or -2 from owner_check.lua (nothing written).
for i = 4, #ARGV do
  redis.call('RPUSH', KEYS[2], ARGV[i])
end
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
