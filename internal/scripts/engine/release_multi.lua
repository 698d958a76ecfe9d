-- release.lua over n keys in one call: KEYS[i] is deleted if it holds
-- ARGV[i]. Returns one reply per key: 1 deleted, 0 not held, or the
-- error of that key alone (pcall: a key of another type fails only its
-- own member, not the other locks merged into the call).
local r = {}
for i = 1, #KEYS do
  local v = redis.pcall("get", KEYS[i])
  if v == ARGV[i] then
    r[i] = redis.pcall("del", KEYS[i])
  elseif type(v) == "table" and v.err then
    r[i] = v
  else
    r[i] = 0
  end
end
return r
