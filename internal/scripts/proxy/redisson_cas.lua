local v = redis.call("get",KEYS[1])
if #KEYS > 1 and ARGV[4] ~= "" then
  -- A change of one client request (its latch KEYS[2]): made at most once
  -- on this master. A latch here means a run of the same request (a
  -- resend, through any proxy) made it already: yes when this run's change
  -- is the one that stands (the same answer and value), else no.
  local done = redis.call("get",KEYS[2])
  if done then
    if done == ARGV[4] and (v == ARGV[2] or (ARGV[2] == "" and not v)) then return 1 end
    return 0
  end
end
if v ~= ARGV[1] then return 0 end
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
