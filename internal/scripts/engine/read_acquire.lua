if redis.call("exists",KEYS[1]) == 1 or redis.call("exists",KEYS[3]) == 1 then return 0 end
local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local ttl = tonumber(ARGV[2])
redis.call("zremrangebyscore",KEYS[2],"-inf",now)
redis.call("zadd",KEYS[2],now+ttl,ARGV[1])
if redis.call("pttl",KEYS[2]) < ttl then redis.call("pexpire",KEYS[2],ttl) end
return 1
