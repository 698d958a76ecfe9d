local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local ms = tonumber(ARGV[3])
local c = tonumber(redis.call("get",KEYS[1])) or 0
if c < tonumber(ARGV[2]) then
  -- Raise the counter, never its TTL lowered: a short waiter's entry TTL
  -- must not let the counter (the order of every later ticket) go early.
  redis.call("set",KEYS[1],ARGV[2],"px",math.max(ms,redis.call("pttl",KEYS[1])))
end
redis.call("zadd",KEYS[2],ARGV[2],ARGV[1])
redis.call("zadd",KEYS[3],now + ms,ARGV[1])
for i = 1, 3 do
  if redis.call("pttl",KEYS[i]) < ms then redis.call("pexpire",KEYS[i],ms) end
end
return 1
