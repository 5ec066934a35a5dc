-- Write a session back whole as its owner knows it: the record (user,
-- token digest and epoch included), the history and the pending
-- confirmations, after Redis lost them or writes failed. Refused when a
-- newer owner holds the session.
-- KEYS[1] meta hash, KEYS[2] history list, KEYS[3] pending index,
-- KEYS[4 .. 3+c] pending confirmation keys (all on the session's hash tag).
-- ARGV[1] the writer's epoch, ARGV[2] TTL ms, ARGV[3] n, ARGV[4 .. 3+2n]
-- meta field/value pairs, then per pending confirmation (c of them) its
-- token, JSON and TTL ms, then the history entries (JSON), oldest first.
-- Returns 1 when the record was missing (a restoration), 0 when it was
-- rewritten, -2 when a newer owner holds it.
local cur = redis.call('HGET', KEYS[1], 'epoch')
if cur and tonumber(cur) > tonumber(ARGV[1]) then
  return -2
end
redis.call('DEL', KEYS[1], KEYS[2])
local n = tonumber(ARGV[3])
local i = 4
for _ = 1, n do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local longest = 0
for k = 4, #KEYS do
  redis.call('SET', KEYS[k], ARGV[i + 1], 'PX', ARGV[i + 2])
  redis.call('SADD', KEYS[3], ARGV[i])
  if tonumber(ARGV[i + 2]) > longest then
    longest = tonumber(ARGV[i + 2])
  end
  i = i + 3
end
if longest > 0 then
  redis.call('PEXPIRE', KEYS[3], longest)
end
while i <= #ARGV do
  redis.call('RPUSH', KEYS[2], ARGV[i])
  i = i + 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if cur then
  return 0
end
return 1
