if redis.call("get",KEYS[1]) ~= ARGV[1] then return 0 end
local h = redis.call("hmget",KEYS[2],"token","seq")
if h[1] == ARGV[1] and (tonumber(h[2]) or 0) >= tonumber(ARGV[3]) then return 1 end
redis.call("hset",KEYS[2],"token",ARGV[1],"term",ARGV[2],"seq",ARGV[3],"value",ARGV[4])
return 1
