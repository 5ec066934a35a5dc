-- Record answered calls as the session's owner, each only if it is still
-- claimed in the ledger (a call trimmed away meanwhile is not brought back
-- without its order entry).
-- KEYS[1] meta hash, KEYS[2] calls hash, KEYS[3] order list
-- ARGV[1] the writer's epoch, ARGV[2] TTL ms, ARGV[3..] triples: call id,
-- record JSON, idempotency key of a success ('' for none). A key's first
-- success is kept as the field 'k:<key>' → call id, in the order list like
-- a call, so that it is trimmed with the oldest calls.
-- Returns 1 when written; or, writing nothing, -1 when the record is gone
-- or was written back by an older owner, -2 when another connection owns
-- the session now (a newer epoch), as the append script does.
-- (owner_check.lua runs first: -1 and -2 come from it.)
for i = 3, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    if ARGV[i + 2] ~= '' and redis.call('HSETNX', KEYS[2], 'k:' .. ARGV[i + 2], ARGV[i]) == 1 then
      redis.call('RPUSH', KEYS[3], 'k:' .. ARGV[i + 2])
    end
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1
