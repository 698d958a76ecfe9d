local r = {redis.call("get",KEYS[1]) or "", redis.call("pttl",KEYS[1])}
if #KEYS > 1 then r[3] = redis.call("get",KEYS[2]) or "" end
return r
