local c = tonumber(redis.call("get",KEYS[1]))
if c == nil or c < tonumber(ARGV[1]) then redis.call("set",KEYS[1],ARGV[1]) end
return 1
