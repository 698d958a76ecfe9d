if redis.call("hget",KEYS[1],"token") == ARGV[1] then return redis.call("del",KEYS[1]) end
return 0
