local n = 0
for _, k in ipairs(KEYS) do
  if redis.call("get", k) == ARGV[1] then
    redis.call("del", k)
    n = n + 1
  end
end
return n
