if redis.call("get",KEYS[1]) ~= ARGV[1] then return 0 end
local p = redis.call("pttl",KEYS[1])
if p <= 0 then return 0 end
local c = tonumber(redis.call("get",KEYS[2]))
if c == nil or c < tonumber(ARGV[2]) then redis.call("set",KEYS[2],ARGV[2]) end
redis.call("set",KEYS[1],ARGV[3],"PX",p)
return 1
