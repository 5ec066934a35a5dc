-- The owner check a write of a session's keys starts with: store/ prepends
-- it to such scripts (ownedScript). KEYS[1] is the session's meta hash,
-- ARGV[1] the writer's epoch. Nothing is written when it ends the script:
-- -1 when the record is gone or was written back by an older owner (Redis
-- lost it: the writer restores the whole session), -2 when another
-- connection owns the session now (a newer epoch).
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
  return -1
end
if tonumber(epoch) > tonumber(ARGV[1]) then
  return -2
end
if epoch ~= ARGV[1] then
  return -1
end
