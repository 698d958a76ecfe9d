local t = redis.call("time")
local now = tonumber(t[1])*1000 + math.floor(tonumber(t[2])/1000)
local function left(w)
  local e = tonumber(redis.call("zscore",KEYS[3],w))
  if e == nil then return 0 end
  return e - now
end
local function live(w) return left(w) > 0 end
local head, life = "", 0
for i = 0, 63 do
  local w = redis.call("zrange",KEYS[2],i,i)[1]
  if not w then break end
  if live(w) then head, life = w, left(w) break end
end
local tk = ""
if ARGV[1] ~= "" and live(ARGV[1]) then tk = redis.call("zscore",KEYS[2],ARGV[1]) or "" end
return {redis.call("get",KEYS[1]) or "", redis.call("pttl",KEYS[1]), tk, head, life}
