-- The end of an operator's action on a session (session_close.lua,
-- handoff_end.lua), prepended to them as a function: the action's event
-- goes on the timeline (the newest keep entries kept, for as long as the
-- record lives), and the node holding the session hears it on the owners
-- channel. KEYS[1] meta hash, KEYS[2] timeline list. Returns 1.
local function announce(channel, message, event, keep)
  redis.call('RPUSH', KEYS[2], event)
  redis.call('LTRIM', KEYS[2], -tonumber(keep), -1)
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  redis.call('PUBLISH', channel, message)
  return 1
end
