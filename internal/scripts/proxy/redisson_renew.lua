local v = redis.call("get",KEYS[1])
if not v then return 0 end
local ok = ARGV[1] ~= "" and string.match(v,"^(.*)|[RF]|%d+|%x+|%d+$") == ARGV[1]
if not ok and #ARGV > 2 and string.match(v,"^rw|[rw]|%x+|[%x=;]+$") then
  for i = 3, #ARGV do
    if string.find(v,"|"..ARGV[i].."=",1,true) or string.find(v,";"..ARGV[i].."=",1,true) then
      ok = true
      break
    end
  end
end
if not ok then return 0 end
redis.call("pexpire",KEYS[1],ARGV[2])
return 1
