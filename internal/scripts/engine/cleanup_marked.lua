local n = #KEYS / 2
local deleted = 0
for i = 1, n do
  if redis.call("get", KEYS[n + i]) == ARGV[2] then
    if redis.call("get", KEYS[i]) == ARGV[1] then
      redis.call("del", KEYS[i])
      deleted = deleted + 1
    end
    redis.call("del", KEYS[n + i])
  end
end
return deleted
