/**
 * The one script every change of the shared limits runs (Redis runs a script whole, with nothing
 * between its commands, so a check and the change it allows are one step across replicas).
 *
 * KEYS: 1 leases (sorted set: replica id -> lease end, ms), 2 queued (hash: replica id -> queued calls, all
 * servers together), 3 running (hash: `<replica id> <server>` -> slots held on that model server), 4 alone
 * (the replica whose lone hold waits for every slot of the target server), 5 pins (hash:
 * `<server> <slot number>` -> `<replica id> <command number>`: which slot each held slot is).
 * ARGV: 1 replica id, 2 lease ms, 3 mode, 4 `freed` channel, 5 MAX_QUEUE, 6 MAX_INFLIGHT, 7 target server
 * (empty for queue-only changes), 8 change of queued, 9 change of slots held on the target, 10 this
 * command's number, 11 the slot number freed (-1: none), 12 the lowest number of this replica's commands
 * still unanswered (for `set`), 13 the replica's queued count to restore if its entry is gone, 14 how many
 * (server, slots held) pairs follow, then those pairs, then (server, slot number) pairs of its pinned slots.
 * Modes: `op` applies the changes if the totals allow, pinning a free slot number when it takes one slot;
 * `admit` reserves ARGV 8 queued calls as `op` does and, when ARGV 9 is 1, also takes and pins a slot of
 * the target if one is free (a request then starts without another round trip); `alone` is `op` for a
 * lone hold, which first claims the server so that no other hold starts on it meanwhile; `unclaim` drops
 * that claim; `set` (the heartbeat) sets the replica's counts to ARGV 13 and the pairs, restores its pins
 * and drops pins of its own that it no longer holds (made by a command answered before this one); `leave`
 * (a clean stop) removes every entry of the replica (its lease, its counts, its pins, its claim on the
 * target) and nothing of any other, and publishes `expired` (its slots are free): a key left empty is gone.
 * Returns {admitted 1 or 0, queued total, slots held on the target (on all servers without one), slots
 * granted by `admit`, the slot number pinned (-1: none)}, the totals as seen before the change.
 * `freed <count> <server>` is published when slots are freed and a hold may be waiting for one: a queued
 * call (queued > 0) or a lone hold's claim. Holds outside the queue (failover, lone retries) that wait find
 * freed slots by polling.
 * Time is Redis's own (TIME), so replicas' clocks do not matter. A server's name never holds a space (it is
 * a URL), so `<replica id> <server>` and `<server> <slot>` split unambiguously.
 */
export const LIMITS_SCRIPT = `
local me = ARGV[1]
local lease = tonumber(ARGV[2])
local mode = ARGV[3]
local target = ARGV[7]
local maxInflight = tonumber(ARGV[6])
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
  local pins = redis.call('HGETALL', KEYS[5])
  for i = 1, #pins, 2 do
    if gone[string.match(pins[i + 1], '^(%S+) ')] then redis.call('HDEL', KEYS[5], pins[i]) end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('PUBLISH', ARGV[4], 'expired')
end
if mode == 'leave' then
  redis.call('ZREM', KEYS[1], me)
  redis.call('HDEL', KEYS[2], me)
  for _, field in ipairs(redis.call('HKEYS', KEYS[3])) do
    if string.match(field, '^(%S+) ') == me then redis.call('HDEL', KEYS[3], field) end
  end
  local pins = redis.call('HGETALL', KEYS[5])
  for i = 1, #pins, 2 do
    if string.match(pins[i + 1], '^(%S+) ') == me then redis.call('HDEL', KEYS[5], pins[i]) end
  end
  if redis.call('GET', KEYS[4]) == me then redis.call('DEL', KEYS[4]) end
  redis.call('PUBLISH', ARGV[4], 'expired')
  return {1, 0, 0, 0, -1}
end
local npairs = tonumber(ARGV[14])
local pinsFrom = 15 + 2 * npairs
if mode == 'set' or not redis.call('ZSCORE', KEYS[1], me) then
  redis.call('HSET', KEYS[2], me, ARGV[13])
  for i = 15, pinsFrom - 1, 2 do
    local field = me .. ' ' .. ARGV[i]
    if tonumber(ARGV[i + 1]) > 0 then redis.call('HSET', KEYS[3], field, ARGV[i + 1])
    else redis.call('HDEL', KEYS[3], field) end
  end
  local held = {}
  for i = pinsFrom, #ARGV, 2 do
    local field = ARGV[i] .. ' ' .. ARGV[i + 1]
    held[field] = true
    local holder = redis.call('HGET', KEYS[5], field)
    if not holder then redis.call('HSET', KEYS[5], field, me .. ' ' .. ARGV[10]) end
  end
  if mode == 'set' then
    local unanswered = tonumber(ARGV[12])
    local pins = redis.call('HGETALL', KEYS[5])
    for i = 1, #pins, 2 do
      local who, number = string.match(pins[i + 1], '^(%S+) (%d+)$')
      if who == me and not held[pins[i]] and tonumber(number) < unanswered then redis.call('HDEL', KEYS[5], pins[i]) end
    end
  end
end
redis.call('ZADD', KEYS[1], now + lease, me)
-- Keys outlive the last lease by one more, then go: a deployment (or a test) that stopped leaves nothing.
for _, i in ipairs({1, 2, 3, 5}) do redis.call('PEXPIRE', KEYS[i], lease * 2) end
local queued = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do queued = queued + tonumber(v) end
-- Held on the target server; with no target (a change of the queue), held on every server.
local running = 0
local suffix = ' ' .. target
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  if target == '' or string.sub(all[i], -#suffix) == suffix then running = running + tonumber(all[i + 1]) end
end
if mode == 'set' then return {1, queued, running, 0, -1} end
if mode == 'unclaim' then
  if redis.call('GET', KEYS[4]) == me then redis.call('DEL', KEYS[4]) end
  return {1, queued, running, 0, -1}
end
-- The lowest slot number of the target that no live hold has pinned, pinned for this replica.
local function pin()
  for i = 0, maxInflight - 1 do
    local field = target .. ' ' .. i
    if redis.call('HSETNX', KEYS[5], field, me .. ' ' .. ARGV[10]) == 1 then return i end
  end
  return -1
end
local dq = tonumber(ARGV[8])
local dr = tonumber(ARGV[9])
if dq > 0 and queued + dq > tonumber(ARGV[5]) then return {0, queued, running, 0, -1} end
if mode == 'admit' then
  local granted = 0
  local pinned = -1
  if dr > 0 and redis.call('EXISTS', KEYS[4]) == 0 and running < maxInflight then
    granted = 1
    pinned = pin()
    redis.call('HINCRBY', KEYS[3], me .. ' ' .. target, 1)
  end
  redis.call('HINCRBY', KEYS[2], me, dq)
  return {1, queued, running, granted, pinned}
end
if dr > 0 then
  local holder = redis.call('GET', KEYS[4])
  if mode == 'alone' then
    if holder and holder ~= me then return {0, queued, running, 0, -1} end
    redis.call('SET', KEYS[4], me, 'PX', lease)
  elseif holder then
    return {0, queued, running, 0, -1}
  end
  if running + dr > maxInflight then return {0, queued, running, 0, -1} end
  if mode == 'alone' then redis.call('DEL', KEYS[4]) end
end
local pinned = -1
if dr == 1 then pinned = pin() end
local freed = tonumber(ARGV[11])
if freed >= 0 then
  local field = target .. ' ' .. freed
  local holder = redis.call('HGET', KEYS[5], field)
  if holder and string.match(holder, '^(%S+) ') == me then redis.call('HDEL', KEYS[5], field) end
end
if dq ~= 0 then redis.call('HINCRBY', KEYS[2], me, dq) end
if dr ~= 0 then
  local field = me .. ' ' .. target
  if tonumber(redis.call('HINCRBY', KEYS[3], field, dr)) <= 0 then redis.call('HDEL', KEYS[3], field) end
end
if dr < 0 and (queued + dq > 0 or redis.call('EXISTS', KEYS[4]) == 1) then
  redis.call('PUBLISH', ARGV[4], 'freed ' .. (-dr) .. ' ' .. target)
end
return {1, queued, running, 0, pinned}
`;
