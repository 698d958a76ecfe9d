-- extend.lua over n keys in one call: the TTL of KEYS[i] is set to
-- ARGV[2i] ms if it holds ARGV[2i-1]. Returns one reply per key: 1
-- extended, 0 not held, or that key's own error.
local r = {}
for i = 1, #KEYS do
  local v = redis.pcall("get", KEYS[i])
  if v == ARGV[2*i-1] then
    r[i] = redis.pcall("pexpire", KEYS[i], ARGV[2*i])
  elseif type(v) == "table" and v.err then
    r[i] = v
  else
    r[i] = 0
  end
end
return r
