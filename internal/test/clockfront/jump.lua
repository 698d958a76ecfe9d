-- Moves the expiry of every key with a TTL back by ARGV[1] milliseconds,
-- in every database (from the caller's, 0 on a fresh connection, up to
-- the first SELECT that fails: the last one, or 0 in cluster mode). A key
-- with at most that much TTL left is deleted. Returns {keys cut, keys
-- deleted}. It runs atomically, and the master's clock is frozen for the
-- script, so every key is cut against one "now".
local d = tonumber(ARGV[1])
local cut, gone = 0, 0
local db = 0
repeat
  for _, k in ipairs(redis.call('KEYS', '*')) do
    local left = redis.call('PTTL', k)
    if left >= 0 then
      if left <= d then
        redis.call('DEL', k)
        gone = gone + 1
      else
        redis.call('PEXPIREAT', k, redis.call('PEXPIRETIME', k) - d)
        cut = cut + 1
      end
    end
  end
  db = db + 1
  local sel = redis.pcall('SELECT', db)
until type(sel) == 'table' and sel.err
return {cut, gone}
