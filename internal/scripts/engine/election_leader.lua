local v = redis.call("get",KEYS[1])
if not v then return false end
local h = redis.call("hmget",KEYS[2],"token","term","seq","value")
if h[1] ~= v then return {v, redis.call("pttl",KEYS[1])} end
return {v, redis.call("pttl",KEYS[1]), h[2], h[3], h[4]}
