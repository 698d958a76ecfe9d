local w = string.sub(KEYS[1], 1, -9)
if redis.call("exists",w) == 1 or redis.call("exists",w..":wwait") == 1 then return 0 end
local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local ttl = tonumber(ARGV[2])
redis.call("zremrangebyscore",KEYS[1],"-inf",now)
redis.call("zadd",KEYS[1],now+ttl,ARGV[1])
if redis.call("pttl",KEYS[1]) < ttl then redis.call("pexpire",KEYS[1],ttl) end
return 1
