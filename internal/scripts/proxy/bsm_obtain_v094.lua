local wrote = 0
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[3]) then
  wrote = 1
else
  local offset = tonumber(ARGV[2])
  if redis.call("getrange", KEYS[1], 0, offset-1) == string.sub(ARGV[1], 1, offset) then
    redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[3])
    wrote = 2
  end
end
if wrote > 0 then
  redis.call("set", KEYS[2], ARGV[4], "PX", ARGV[3])
end
return wrote
