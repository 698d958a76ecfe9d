local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local ttl = tonumber(ARGV[2])
local s = redis.call("zscore",KEYS[1],ARGV[1])
if not s or tonumber(s) <= now then return 0 end
redis.call("zadd",KEYS[1],now+ttl,ARGV[1])
if redis.call("pttl",KEYS[1]) < ttl then redis.call("pexpire",KEYS[1],ttl) end
return 1
