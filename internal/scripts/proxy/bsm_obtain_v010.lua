local n = #KEYS / 2
local setArgs = {}
for i = 1, n do
  table.insert(setArgs, KEYS[i])
  table.insert(setArgs, ARGV[1])
end
local res = 1
if redis.call("msetnx", unpack(setArgs)) ~= 1 then
  local offset = tonumber(ARGV[2])
  for i = 1, n do
    if redis.call("getrange", KEYS[i], 0, offset-1) ~= string.sub(ARGV[1], 1, offset) then
      return 0
    end
  end
  redis.call("mset", unpack(setArgs))
  res = 2
end
for i = 1, n do
  redis.call("pexpire", KEYS[i], ARGV[3])
  redis.call("set", KEYS[n + i], ARGV[4], "PX", ARGV[3])
end
return res
