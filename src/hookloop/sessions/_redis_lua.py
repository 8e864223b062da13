"""The Lua scripts of the Redis session store; Redis runs each one atomically.

Redis does not roll a script back when it fails halfway, so every script checks all it
needs before its first write.
"""

__all__ = ["APPEND", "CREATE", "FORK", "PRUNE"]

# KEYS: session hash, log stream, ids hash, session index
# ARGV: session id, message id, format, data, expected seq or "", now, max messages or ""
# Returns {status, seq}: 0 appended, 1 the same message was there, 2 conflict (seq = last),
# 3 the id is taken by another message, 4 the session's record is broken.
APPEND = """
local known = redis.call('HGET', KEYS[3], ARGV[2])
if known then
    local entry = redis.call('XRANGE', KEYS[2], known .. '-0', known .. '-0')
    if #entry == 0 then return {1, tonumber(known)} end
    local fields = entry[1][2]
    for i = 1, #fields, 2 do
        if fields[i] == 'd' and fields[i + 1] == ARGV[4] then return {1, tonumber(known)} end
    end
    return {3, tonumber(known)}
end
local last = redis.call('HGET', KEYS[1], 'last_seq')
if last then
    last = tonumber(last)
    if last == nil then return {4, 0} end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
    return {4, 0}
else
    last = 0
end
if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= last then return {2, last} end
local seq = last + 1
local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #top > 0 and tonumber(string.match(top[1][1], '^(%d+)')) >= seq then return {4, seq} end
if last == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'created_at', ARGV[6])
end
redis.call('XADD', KEYS[2], seq .. '-0', 'i', ARGV[2], 'f', ARGV[3], 'd', ARGV[4])
redis.call('HSET', KEYS[1], 'last_seq', seq, 'updated_at', ARGV[6])
redis.call('HSET', KEYS[3], ARGV[2], seq)
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[1])
if ARGV[7] ~= '' and seq > tonumber(ARGV[7]) then
    local old = redis.call('XRANGE', KEYS[2], '-', (seq - tonumber(ARGV[7])) .. '-0')
    for _, e in ipairs(old) do
        local f = e[2]
        for i = 1, #f, 2 do
            if f[i] == 'i' then redis.call('HDEL', KEYS[3], f[i + 1]) end
        end
        redis.call('XDEL', KEYS[2], e[1])
    end
end
return {0, seq}
"""

# KEYS: session hash, session index; ARGV: session id, parent id or "", now
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'last_seq', 0, 'created_at', ARGV[3], 'updated_at', ARGV[3])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'parent_id', ARGV[2]) end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""

# KEYS: source hash, log, ids; new hash, log, ids; session index
# ARGV: source id, new id, now.  Returns 1, or -1 (no source), -2 (new id taken).
FORK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[4]) == 1 then return -2 end
redis.call('DEL', KEYS[5], KEYS[6])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('COPY', KEYS[2], KEYS[5]) end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('COPY', KEYS[3], KEYS[6]) end
local last = redis.call('HGET', KEYS[1], 'last_seq') or '0'
redis.call('HSET', KEYS[4], 'last_seq', last, 'parent_id', ARGV[1],
    'created_at', ARGV[3], 'updated_at', ARGV[3])
redis.call('ZADD', KEYS[7], ARGV[3], ARGV[2])
return 1
"""

# Chooses the sessions retention removes and deletes them in one step, so an append cannot
# land between the choice and the delete (the chosen session would be the newest by then,
# and the message it just committed would go with it). The session keys are built from the
# prefix here, like _keys() does (Redis Cluster is not supported anyway).
# KEYS: session index; ARGV: key prefix, cutoff score or "", max sessions or "".
# Returns the number of sessions deleted.
PRUNE = """
local doomed = {}
if ARGV[2] ~= '' then
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])) do
        doomed[id] = true
    end
end
if ARGV[3] ~= '' then
    for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], tonumber(ARGV[3]), -1)) do
        doomed[id] = true
    end
end
local n = 0
for id in pairs(doomed) do
    redis.call('DEL', ARGV[1] .. 'session:' .. id, ARGV[1] .. 'log:' .. id,
        ARGV[1] .. 'ids:' .. id)
    redis.call('ZREM', KEYS[1], id)
    n = n + 1
end
return n
"""
