/**
 * The one script every change of the shared limits runs (Redis runs a script whole, with nothing
 * between its commands, so a check and the change it allows are one step across replicas).
 *
 * KEYS: 1 leases (sorted set: replica id -> lease end, ms), 2 queued (hash: replica id -> queued calls, all
 * servers together), 3 running (hash: `<replica id> <server>` -> running slots on that model server), 4 alone
 * (the replica whose lone call waits for every slot of the target server).
 * ARGV: 1 replica id, 2 lease ms, 3 mode, 4 `freed` channel, 5 MAX_QUEUE, 6 MAX_INFLIGHT, 7 target server
 * (empty for queue-only changes), 8 change of queued, 9 change of running on the target, 10 the replica's
 * queued count to restore if its entry is gone, then pairs (server, running count) to restore likewise.
 * Modes: `op` applies the changes if the totals allow; `admit` reserves ARGV 8 queued calls as `op` does and
 * at once turns up to ARGV 9 of them into running slots on the target, as many as are free (a request's
 * first calls then start without another round trip); `alone` is `op` for a lone call, which first claims
 * the server so that no other call starts on it meanwhile; `unclaim` drops that claim; `set` (the
 * heartbeat) sets the replica's counts to ARGV 10 and the pairs.
 * Returns {admitted 1 or 0, queued total, running total on the target (on all servers without one), slots
 * granted by `admit`}, the totals as seen before the change.
 * `freed <count> <server>` is published when slots are freed and a call may be waiting for one: a queued
 * call (queued > 0) or a lone call's claim. Calls outside the queue (retries) that wait find freed slots by polling.
 * Time is Redis's own (TIME), so replicas' clocks do not matter. A server's name never holds a space (it is
 * a URL), so `<replica id> <server>` splits unambiguously.
 */
export const LIMITS_SCRIPT = `
local me = ARGV[1]
local lease = tonumber(ARGV[2])
local mode = ARGV[3]
local target = ARGV[7]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #dead > 0 then
  local gone = {}
  for _, id in ipairs(dead) do
    gone[id] = true
    redis.call('HDEL', KEYS[2], id)
  end
  for _, field in ipairs(redis.call('HKEYS', KEYS[3])) do
    if gone[string.match(field, '^(%S+) ')] then redis.call('HDEL', KEYS[3], field) end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('PUBLISH', ARGV[4], 'expired')
end
if mode == 'set' or not redis.call('ZSCORE', KEYS[1], me) then
  redis.call('HSET', KEYS[2], me, ARGV[10])
  for i = 11, #ARGV, 2 do
    local field = me .. ' ' .. ARGV[i]
    if tonumber(ARGV[i + 1]) > 0 then redis.call('HSET', KEYS[3], field, ARGV[i + 1])
    else redis.call('HDEL', KEYS[3], field) end
  end
end
redis.call('ZADD', KEYS[1], now + lease, me)
-- Keys outlive the last lease by one more, then go: a deployment (or a test) that stopped leaves nothing.
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], lease * 2) end
local queued = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do queued = queued + tonumber(v) end
-- Running on the target server; with no target (a change of the queue), running on every server.
local running = 0
local suffix = ' ' .. target
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  if target == '' or string.sub(all[i], -#suffix) == suffix then running = running + tonumber(all[i + 1]) end
end
if mode == 'set' then return {1, queued, running, 0} end
if mode == 'unclaim' then
  if redis.call('GET', KEYS[4]) == me then redis.call('DEL', KEYS[4]) end
  return {1, queued, running, 0}
end
local dq = tonumber(ARGV[8])
local dr = tonumber(ARGV[9])
if dq > 0 and queued + dq > tonumber(ARGV[5]) then return {0, queued, running, 0} end
if mode == 'admit' then
  local free = tonumber(ARGV[6]) - running
  if redis.call('EXISTS', KEYS[4]) == 1 or free < 0 then free = 0 end
  local granted = math.min(dr, free)
  redis.call('HINCRBY', KEYS[2], me, dq - granted)
  if granted > 0 then redis.call('HINCRBY', KEYS[3], me .. ' ' .. target, granted) end
  return {1, queued, running, granted}
end
if dr > 0 then
  local holder = redis.call('GET', KEYS[4])
  if mode == 'alone' then
    if holder and holder ~= me then return {0, queued, running, 0} end
    redis.call('SET', KEYS[4], me, 'PX', lease)
  elseif holder then
    return {0, queued, running, 0}
  end
  if running + dr > tonumber(ARGV[6]) then return {0, queued, running, 0} end
  if mode == 'alone' then redis.call('DEL', KEYS[4]) end
end
if dq ~= 0 then redis.call('HINCRBY', KEYS[2], me, dq) end
if dr ~= 0 then
  local field = me .. ' ' .. target
  if tonumber(redis.call('HINCRBY', KEYS[3], field, dr)) <= 0 then redis.call('HDEL', KEYS[3], field) end
end
if dr < 0 and (queued + dq > 0 or redis.call('EXISTS', KEYS[4]) == 1) then
  redis.call('PUBLISH', ARGV[4], 'freed ' .. (-dr) .. ' ' .. target)
end
return {1, queued, running, 0}
`;
