/**
 * The one script every change of the shared limits runs (Redis runs a script whole, with nothing
 * between its commands, so a check and the change it allows are one step across replicas).
 *
 * KEYS: 1 leases (sorted set: replica id -> lease end, ms), 2 queued (hash: replica id -> queued calls),
 * 3 running (hash: replica id -> running slots on one model server), 4 alone (the replica whose lone
 * call waits for every slot of that server).
 * ARGV: 1 replica id, 2 lease ms, 3-4 the replica's queued and running counts to restore if its entry is
 * gone, 5 change of queued, 6 change of running, 7 MAX_QUEUE, 8 MAX_INFLIGHT, 9 mode, 10 `freed` channel.
 * Modes: `op` applies the changes if the totals allow; `alone` the same for a lone call, which first claims
 * the server so that no other call starts meanwhile; `unclaim` drops that claim; `set` (the heartbeat)
 * sets the replica's counts to ARGV 3-4.
 * Returns {admitted 1 or 0, queued total, running total} as seen before the change.
 * Time is Redis's own (TIME), so replicas' clocks do not matter.
 */
export const LIMITS_SCRIPT = `
local me = ARGV[1]
local lease = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('PUBLISH', ARGV[10], 'expired')
end
local mode = ARGV[9]
if mode == 'set' or not redis.call('ZSCORE', KEYS[1], me) then
  redis.call('HSET', KEYS[2], me, ARGV[3])
  redis.call('HSET', KEYS[3], me, ARGV[4])
end
redis.call('ZADD', KEYS[1], now + lease, me)
-- Keys outlive the last lease by one more, then go: a deployment (or a test) that stopped leaves nothing.
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], lease * 2) end
local function total(key)
  local sum = 0
  for _, v in ipairs(redis.call('HVALS', key)) do sum = sum + tonumber(v) end
  return sum
end
local queued = total(KEYS[2])
local running = total(KEYS[3])
if mode == 'set' then return {1, queued, running} end
if mode == 'unclaim' then
  if redis.call('GET', KEYS[4]) == me then redis.call('DEL', KEYS[4]) end
  return {1, queued, running}
end
local dq = tonumber(ARGV[5])
local dr = tonumber(ARGV[6])
if dq > 0 and queued + dq > tonumber(ARGV[7]) then return {0, queued, running} end
if dr > 0 then
  local holder = redis.call('GET', KEYS[4])
  if mode == 'alone' then
    if holder and holder ~= me then return {0, queued, running} end
    redis.call('SET', KEYS[4], me, 'PX', lease)
  elseif holder then
    return {0, queued, running}
  end
  if running + dr > tonumber(ARGV[8]) then return {0, queued, running} end
  if mode == 'alone' then redis.call('DEL', KEYS[4]) end
end
if dq ~= 0 then redis.call('HINCRBY', KEYS[2], me, dq) end
if dr ~= 0 then redis.call('HINCRBY', KEYS[3], me, dr) end
if dr < 0 then redis.call('PUBLISH', ARGV[10], 'freed') end
return {1, queued, running}
`;
