local v = redis.call("get",KEYS[1])
local p = -2
if v then p = redis.call("pttl",KEYS[1]) end
if not KEYS[2] then
  if not v then return false end
  return {v, p}
end
local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local r = redis.pcall("zrange",KEYS[2],"+inf","("..now,"BYSCORE","REV","LIMIT",0,1024,"WITHSCORES")
if r.err then
  if string.find(r.err, "WRONGTYPE", 1, true) then
    r = {}
  else
    r = redis.call("zrangebyscore",KEYS[2],"("..now,"+inf","WITHSCORES","LIMIT",0,1024)
  end
end
if #r == 0 and not v then return false end
local n = #r/2
if n == 1024 then n = redis.call("zcard",KEYS[2]) end
for i = 2, #r, 2 do
  local s = tonumber(r[i])
  if s == math.huge then r[i] = -1 else r[i] = s - now end
end
return {v, p, r, n}
