redis.call("zrem",KEYS[2],ARGV[1])
redis.call("zrem",KEYS[3],ARGV[1])
if redis.call("zcard",KEYS[2]) == 0 then redis.call("del",KEYS[4]) end
return 1
