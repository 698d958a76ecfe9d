-- read_acquire.lua over n readers' sets in one call (KEYS[i], token
-- ARGV[2i-1], TTL ARGV[2i] ms), reading the master's TIME once. Returns
-- one reply per key: 1 granted, 0 a writer holds or waits, or that key's
-- own error.
local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local r = {}
for i = 1, #KEYS do
  local k = KEYS[i]
  local w = string.sub(k, 1, -9)
  local ttl = tonumber(ARGV[2*i])
  if redis.call("exists",w) == 1 or redis.call("exists",w..":wwait") == 1 then
    r[i] = 0
  else
    local z = redis.pcall("zremrangebyscore",k,"-inf",now)
    if type(z) == "table" and z.err then
      r[i] = z
    else
      redis.call("zadd",k,now+ttl,ARGV[2*i-1])
      if redis.call("pttl",k) < ttl then redis.call("pexpire",k,ttl) end
      r[i] = 1
    end
  end
end
return r
