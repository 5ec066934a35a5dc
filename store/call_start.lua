-- Open a phone call's stream (store/callstart.go), in one atomic step on the
-- call's hash slot: record the first use of its signed start, and only then
-- take the call's one stream lease (acquire, lease.lua's, prepended; limit 1).
-- KEYS[1] the start's record (turnstile:call:{<sid>}:start:<signature>)
-- KEYS[2] the call's stream leases (turnstile:call:{<sid>}:streams)
-- ARGV[1] how long the record is kept (ms), ARGV[2] now (Unix ms),
-- ARGV[3] the new lease's expiry (Unix ms), ARGV[4] the holder id ('': no lease)
-- Returns {1 first use | 0 a replay, 1 admitted | 0 another stream holds the call}.
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return {0, 0}
end
if ARGV[4] == '' then
  return {1, 1}
end
local admitted = acquire(KEYS[2], ARGV[2], ARGV[3], 1, ARGV[4])
return {1, admitted}
