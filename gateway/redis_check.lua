-- Part of the gateway's startup check: write and delete a key in its
-- namespace from a Lua script, as the session store does (EVALSHA/EVAL,
-- SET, DEL on turnstile:*). A wrong password, a missing permission or a
-- wrong database fails here, before any session does.
-- KEYS[1] the probe key
redis.call('SET', KEYS[1], '1', 'PX', 10000)
redis.call('DEL', KEYS[1])
return 1
