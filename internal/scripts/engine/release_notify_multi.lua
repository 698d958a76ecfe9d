-- release_notify.lua over n keys in one call: KEYS[i] is deleted, and
-- published on channel ARGV[2i], if it holds ARGV[2i-1]. Returns one
-- reply per key: 1 deleted, 0 not held, or that key's own error.
local r = {}
for i = 1, #KEYS do
  local v = redis.pcall("get", KEYS[i])
  if v == ARGV[2*i-1] then
    redis.pcall("del", KEYS[i])
    redis.pcall("publish", ARGV[2*i], KEYS[i])
    r[i] = 1
  elseif type(v) == "table" and v.err then
    r[i] = v
  else
    r[i] = 0
  end
end
return r
