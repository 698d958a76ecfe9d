local v = redis.call("get",KEYS[1])
if not v or string.match(v,"^(.*)|[RF]|%d+|%x+|%d+$") ~= ARGV[1] then return 0 end
redis.call("pexpire",KEYS[1],ARGV[2])
return 1
