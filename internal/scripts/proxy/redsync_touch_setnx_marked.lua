if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
elseif redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") then
	redis.call("SET", KEYS[2], ARGV[3], "PX", ARGV[2])
	return 1
else
	return 0
end
