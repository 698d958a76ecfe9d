local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local gone = redis.call("zrangebyscore",KEYS[3],"-inf",now)
for _, w in ipairs(gone) do redis.call("zrem",KEYS[2],w) end
redis.call("zremrangebyscore",KEYS[3],"-inf",now)
if ARGV[3] ~= "" then
  local ms = tonumber(ARGV[5])
  redis.call("zadd",KEYS[2],ARGV[4],ARGV[3])
  redis.call("zadd",KEYS[3],now + ms,ARGV[3])
  for i = 2, 4 do
    if redis.call("pttl",KEYS[i]) < ms then redis.call("pexpire",KEYS[i],ms) end
  end
end
if redis.call("exists",KEYS[1]) == 1 then return 0 end
local head = redis.call("zrange",KEYS[2],0,0)[1]
if head and head ~= ARGV[3] then return 0 end
redis.call("set",KEYS[1],ARGV[1],"px",ARGV[2])
return 1
