-- Record one more strike on a user's escalating record, in one atomic step:
-- the abuse cooldowns (StartCooldown) and the block strikes (Strike) both.
-- KEYS[1] the record (turnstile:user:{<user>}:cooldown or :strikes), a hash:
--         until = when the current period ends (Unix ms), strikes = strikes remembered
-- ARGV[1] now (Unix ms), ARGV[2] the first period (ms), ARGV[3] the longest (ms),
-- ARGV[4] how long strikes are remembered after a period ends (ms)
-- Returns {until, strikes}. A strike during a period (another connection of
-- the user, opened before it) is the same strike: the record is unchanged.
-- Periods double with each strike, from the first up to the longest; with a
-- first period of 0 the record only counts strikes (every one counts, even
-- from a node whose clock is behind), each remembered for the memory after
-- the latest.
local now, first, longest, memory = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local untilMs, strikes
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  -- A bare strike count, as earlier versions kept the block strikes.
  untilMs, strikes = now, tonumber(redis.call('GET', KEYS[1])) or 0
  redis.call('DEL', KEYS[1])
else
  local cur = redis.call('HMGET', KEYS[1], 'until', 'strikes')
  untilMs, strikes = tonumber(cur[1]) or 0, tonumber(cur[2]) or 0
end
if first > 0 and untilMs > now then
  return {untilMs, strikes}
end
if now - untilMs > memory then
  strikes = 0
end
strikes = strikes + 1
local d = first
for _ = 2, strikes do
  if d >= longest then break end
  d = d * 2
end
if d > longest then d = longest end
untilMs = now + d
redis.call('HSET', KEYS[1], 'until', untilMs, 'strikes', strikes)
redis.call('PEXPIRE', KEYS[1], d + memory)
return {untilMs, strikes}
