-- Record answered calls, each only if it is still claimed in the ledger
-- (a call trimmed away meanwhile is not brought back without its order entry).
-- KEYS[1] calls hash, KEYS[2] order list
-- ARGV[1] TTL ms, ARGV[2..] pairs: call id, record JSON
for i = 2, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
