-- Creates a session record unless one already exists, in one atomic step.
-- KEYS[1] meta hash, KEYS[2] history list.
-- ARGV[1] TTL in milliseconds, ARGV[2..] field/value pairs of the meta hash.
-- Returns 1 when created, 0 when the id is taken.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
-- A history without a record is a leftover (e.g. an Append after expiry);
-- a new session starts empty.
redis.call('DEL', KEYS[2])
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
