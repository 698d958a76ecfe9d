local v = redis.call("get",KEYS[1])
local p = -2
if v then p = redis.call("pttl",KEYS[1]) end
if not KEYS[2] then
  if not v then return false end
  return {v, p}
end
local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local r = redis.call("zrangebyscore",KEYS[2],"("..now,"+inf","WITHSCORES","LIMIT",0,1024)
for i = 2, #r, 2 do r[i] = tonumber(r[i]) - now end
if not v and #r == 0 then return false end
return {v, p, r}
