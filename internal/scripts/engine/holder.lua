local v = redis.call("get",KEYS[1]) if not v then return false end return {v, redis.call("pttl",KEYS[1])}
