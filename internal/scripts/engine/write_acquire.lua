if redis.call("exists",KEYS[1]) == 1 then return 0 end
local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
redis.call("zremrangebyscore",KEYS[2],"-inf",now)
if redis.call("zcard",KEYS[2]) > 0 then
  if ARGV[3] ~= "" then
    local w = redis.call("get",KEYS[3])
    if not w or w == ARGV[3] then redis.call("set",KEYS[3],ARGV[3],"px",ARGV[2]) end
  end
  return 0
end
redis.call("set",KEYS[1],ARGV[1],"px",ARGV[2])
if ARGV[3] ~= "" and redis.call("get",KEYS[3]) == ARGV[3] then redis.call("del",KEYS[3]) end
return 1
