local n = #KEYS / 2
for i = 1, n do
  if redis.call("exists", KEYS[i]) == 1 then
    return 0
  end
end
for i = 1, n do
  redis.call("set", KEYS[i], ARGV[1], "PX", ARGV[2])
  redis.call("set", KEYS[n + i], ARGV[#ARGV], "PX", ARGV[2])
end
return 1
