local ok = redis.call("set",KEYS[1],ARGV[1],"NX","PX",ARGV[2])
if ok then redis.call("set",KEYS[2],ARGV[3],"PX",ARGV[2]) end
return ok
