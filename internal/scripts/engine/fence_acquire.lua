local t = redis.call("time")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local c = tonumber(redis.call("get",KEYS[2])) or 0
if c < now then c = now end
if c >= 9007199254740991 then return redis.error_reply("ERR redlock: fencing counter or clock at 2^53 microseconds: its tokens would not be exact") end
if not redis.call("set",KEYS[1],ARGV[1],"NX","PX",ARGV[2]) then return false end
if KEYS[3] then redis.call("set",KEYS[3],ARGV[3],"PX",ARGV[2]) end
c = c + 1
redis.call("set",KEYS[2],string.format("%d",c))
return c
