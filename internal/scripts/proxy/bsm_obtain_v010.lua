local setArgs = {}
for _, key in ipairs(KEYS) do
  table.insert(setArgs, key)
  table.insert(setArgs, ARGV[1])
end
local res = 1
if redis.call("msetnx", unpack(setArgs)) ~= 1 then
  local offset = tonumber(ARGV[2])
  for _, key in ipairs(KEYS) do
    if redis.call("getrange", key, 0, offset-1) ~= string.sub(ARGV[1], 1, offset) then
      return 0
    end
  end
  redis.call("mset", unpack(setArgs))
  res = 2
end
for _, key in ipairs(KEYS) do
  redis.call("pexpire", key, ARGV[3])
end
return res
