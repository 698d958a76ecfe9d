local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
  return 0
end
local expiration = redis.call('pttl', KEYS[1])
if not expiration or expiration < 0 then
  return 0
end
local newttl = tonumber(ARGV[2]) + expiration
local cap = tonumber(ARGV[3])
if newttl > cap then
  newttl = cap
end
redis.call('pexpire', KEYS[1], newttl)
return 1
