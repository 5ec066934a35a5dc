-- Admit one holder under a limit, in one atomic step (AcquireLease; acquire
-- is lease.lua's, prepended).
-- KEYS[1] the lease group
-- ARGV[1] now (Unix ms), ARGV[2] the new lease's expiry (Unix ms),
-- ARGV[3] the limit, ARGV[4] the holder id
-- Returns {1 admitted | 0 refused, live leases before this one}.
local admitted, n = acquire(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4])
return {admitted, n}
