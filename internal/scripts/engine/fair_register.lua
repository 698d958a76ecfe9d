local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local c = tonumber(redis.call("get",KEYS[1])) or 0
if c < tonumber(ARGV[2]) then redis.call("set",KEYS[1],ARGV[2],"px",ARGV[3]) end
redis.call("zadd",KEYS[2],ARGV[2],ARGV[1])
redis.call("zadd",KEYS[3],now + tonumber(ARGV[3]),ARGV[1])
redis.call("pexpire",KEYS[2],ARGV[3])
redis.call("pexpire",KEYS[3],ARGV[3])
return 1
