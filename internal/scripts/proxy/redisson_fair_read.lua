local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local gone = redis.call("zrangebyscore",KEYS[3],"-inf",now)
for _, w in ipairs(gone) do redis.call("zrem",KEYS[2],w) end
redis.call("zremrangebyscore",KEYS[3],"-inf",now)
local head, life = redis.call("zrange",KEYS[2],0,0)[1] or "", 0
if head ~= "" then life = (tonumber(redis.call("zscore",KEYS[3],head)) or now) - now end
local tk = ""
if ARGV[1] ~= "" then tk = redis.call("zscore",KEYS[2],ARGV[1]) or "" end
return {redis.call("get",KEYS[1]) or "", redis.call("pttl",KEYS[1]), tk, head, life}
