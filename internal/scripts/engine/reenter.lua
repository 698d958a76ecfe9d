if redis.call("get",KEYS[1]) == ARGV[1] then if redis.call("pttl",KEYS[1]) < tonumber(ARGV[2]) then redis.call("pexpire",KEYS[1],ARGV[2]) end return 1 else return 0 end
