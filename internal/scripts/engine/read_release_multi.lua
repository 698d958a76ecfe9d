-- read_release.lua over n readers' sets in one call: ARGV[i] leaves
-- KEYS[i]. Returns one reply per key: 1 removed, 0 not a member, or that
-- key's own error (pcall: a key of another type fails only its member).
local r = {}
for i = 1, #KEYS do
  r[i] = redis.pcall("zrem", KEYS[i], ARGV[i])
end
return r
