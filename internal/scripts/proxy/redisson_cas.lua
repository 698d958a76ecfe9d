if redis.call("get",KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == "" then
  redis.call("del",KEYS[1])
else
  local p = redis.call("pttl",KEYS[1])
  local ms = tonumber(ARGV[3])
  if ARGV[6] == "exact" or p < ms then p = ms end
  if p <= 0 then return 0 end
  redis.call("set",KEYS[1],ARGV[2],"PX",p)
end
if #KEYS > 1 then
  if ARGV[4] == "" then redis.call("del",KEYS[2]) else redis.call("set",KEYS[2],ARGV[4],"PX",ARGV[5]) end
end
return 1
