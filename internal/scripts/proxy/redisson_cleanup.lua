local v = redis.call("get",KEYS[1])
for _, a in ipairs(ARGV) do
  if v == a then
    redis.call("del",KEYS[1])
    return 1
  end
end
return 0
