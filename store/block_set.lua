-- Block a user unless a longer block stands, in one atomic step (two
-- blocks of the user at once, on any nodes, keep the longer).
-- KEYS[1] the user's block (turnstile:user:{<user>}:block), JSON with untilMs
-- ARGV[1] the new block's end (Unix ms), ARGV[2] its JSON, ARGV[3] now (Unix ms),
-- ARGV[4] the owners channel, ARGV[5] the announcement (blockAnnouncement: the
-- user and the block, so that no node reads the block back)
-- Returns 1 when the block is stored (and every node told),
-- 0 when a longer one stands or the new one has already ended.
local newUntil, now = tonumber(ARGV[1]), tonumber(ARGV[3])
if newUntil <= now then
  return 0
end
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, cur = pcall(cjson.decode, raw)
  local curUntil = ok and type(cur) == 'table' and tonumber(cur.untilMs) or nil
  if not curUntil then
    -- A block written without its end in ms: its expiry is its end.
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl > 0 then
      curUntil = now + pttl
    end
  end
  if curUntil and curUntil > newUntil then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', newUntil - now)
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
