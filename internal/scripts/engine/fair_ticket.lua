local t = redis.call("time")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local c = tonumber(redis.call("get",KEYS[1])) or 0
if c < now then c = now end
c = c + 1
local ms = tonumber(ARGV[1])
local left = redis.call("pttl",KEYS[1])
if left > ms then ms = left end
redis.call("set",KEYS[1],string.format("%d",c),"px",ms)
return c
