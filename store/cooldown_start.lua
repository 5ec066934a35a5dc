-- Start a user's abuse cooldown, escalating on repeats, in one atomic step.
-- KEYS[1] the user's cooldown (turnstile:user:{<user>}:cooldown), a hash:
--         until = when the cooldown ends (Unix ms), strikes = abuses remembered
-- ARGV[1] now (Unix ms), ARGV[2] the first cooldown (ms), ARGV[3] the longest (ms),
-- ARGV[4] how long strikes are remembered after a cooldown ends (ms)
-- Returns {until, strikes}. An abuse during a cooldown (another connection of
-- the user, opened before it) is the same strike: the cooldown is unchanged.
local now, first, longest, memory = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cur = redis.call('HMGET', KEYS[1], 'until', 'strikes')
local untilMs, strikes = tonumber(cur[1]) or 0, tonumber(cur[2]) or 0
if untilMs > now then
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
