local v = redis.call("get",KEYS[1])
if not v then return 0 end
local lease = tonumber(ARGV[2])
if ARGV[1] ~= "" and string.match(v,"^(.*)|[RF]|%d+|%x+|%d+$") == ARGV[1] then
  redis.call("pexpire",KEYS[1],lease)
  return 1
end
if #ARGV > 2 and string.match(v,"^rw|[rw]|%x+|[%x=;]+$") then
  for i = 3, #ARGV do
    if string.find(v,"|"..ARGV[i].."=",1,true) or string.find(v,";"..ARGV[i].."=",1,true) then
      if redis.call("pttl",KEYS[1]) < lease then redis.call("pexpire",KEYS[1],lease) end
      return 1
    end
  end
end
return 0
