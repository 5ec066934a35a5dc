-- Append entries to a session's history as its owner, in one atomic step.
-- KEYS[1] meta hash, KEYS[2] history list (one hash tag: the session's).
-- ARGV[1] the writer's epoch, ARGV[2] TTL ms, ARGV[3] most entries kept,
-- ARGV[4] most bytes kept, ARGV[5] a turn whose user entry to take back
-- first ('0': none), ARGV[6] n, ARGV[7 .. 6+2n] meta field/value pairs, then
-- the entries (JSON), oldest first.
-- Returns 1 when written, -1 when the record is gone or was written back
-- by an older owner (Redis lost it: the writer restores the whole session),
-- -2 when another connection owns the session now (a newer epoch): nothing
-- is written.
-- (owner_check.lua runs first: -1 and -2 come from it.)
local bytes = tonumber(redis.call('HGET', KEYS[1], 'historyBytes') or '0') or 0
if ARGV[5] ~= '0' then
  local last = redis.call('LINDEX', KEYS[2], -1)
  if last then
    local ok, e = pcall(cjson.decode, last)
    if ok and type(e) == 'table' and e['role'] == 'user' and tostring(e['turn']) == ARGV[5] then
      redis.call('RPOP', KEYS[2])
      bytes = bytes - #last
    end
  end
end
local n = tonumber(ARGV[6])
local first = 7 + 2 * n
for i = first, #ARGV do
  redis.call('RPUSH', KEYS[2], ARGV[i])
  bytes = bytes + #ARGV[i]
end
local maxN, maxB = tonumber(ARGV[3]), tonumber(ARGV[4])
local len = redis.call('LLEN', KEYS[2])
while len > 1 and (len > maxN or bytes > maxB) do
  bytes = bytes - #redis.call('LPOP', KEYS[2])
  len = len - 1
end
if bytes < 0 or len == 0 then
  bytes = 0
end
for i = 7, first - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'historyBytes', bytes)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
