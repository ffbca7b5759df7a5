import type { BulkCode } from './image';
import { LuaScript } from './lua';
import { FROZEN_PREFIX } from './keys';

/**
 * Shared Lua helpers. `ns` is the generation namespace `<base>:g<gen>:`. Item stores keep one hash
 * per item (member → canonical JSON) and, per order, one sorted set over all items plus one per
 * indexed field value. Every sorted-set member has score 0 and is a lexicographic sort key:
 * 16 hex digits per number, encoded so that byte order is descending numeric order, then ':' and
 * the item id. ZRANGEBYLEX with an exclusive start then pages by keyset, ties broken by id.
 */
const ITEM_HELPERS = `
local IDX = {'project','kind','why','agent','priority','status'}
local function hexdesc(x)
  if x == 0 then x = 0 end
  local b = struct.pack('>d', x)
  local neg = string.byte(b, 1) >= 128
  local out = {}
  for i = 1, 8 do
    local c = string.byte(b, i)
    if neg then c = 255 - c elseif i == 1 then c = c + 128 end
    out[i] = string.format('%02x', 255 - c)
  end
  return table.concat(out)
end
local function readDoc(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local doc = {}
  for i = 1, #flat, 2 do doc[flat[i]] = flat[i + 1] end
  return doc
end
local function itemEntries(ns, store, id, doc)
  local at = tonumber(cjson.decode(doc['at']))
  local urgency = tonumber(cjson.decode(doc['urgency']))
  local byNewest = hexdesc(at) .. ':' .. id
  local byUrgent = hexdesc(urgency) .. hexdesc(at) .. ':' .. id
  local p = ns .. '~items:' .. store .. ':'
  local entries = { { p .. 'all:newest', byNewest }, { p .. 'all:urgent', byUrgent } }
  for _, field in ipairs(IDX) do
    local raw = doc[field]
    if raw then
      local value = cjson.decode(raw)
      if type(value) == 'string' then
        entries[#entries + 1] = { p .. 'idx:newest:' .. field .. ':' .. value, byNewest }
        entries[#entries + 1] = { p .. 'idx:urgent:' .. field .. ':' .. value, byUrgent }
      end
    end
  end
  return entries
end
local function unindex(ns, store, id, doc)
  for _, e in ipairs(itemEntries(ns, store, id, doc)) do redis.call('ZREM', e[1], e[2]) end
end
local function index(ns, store, id, doc)
  for _, e in ipairs(itemEntries(ns, store, id, doc)) do redis.call('ZADD', e[1], 0, e[2]) end
end
`;

/**
 * Apply a batch of events to one generation, atomically.
 * KEYS: active pointer, generation counter. ARGV: base, target ('active' or a generation number),
 * projection version, batch JSON `[[seqString, [wireOp...]], ...]` in increasing seq order, and
 * optionally the expected last applied seq: when given and the generation's last applied seq is
 * not exactly that, nothing is written and the reply is {'moved', generation, lastSeq}
 * (compare-and-set: another applier, or a swapped-in rebuild, got there first), then optionally
 * a rebuild's owner token and a create flag ('1'). With a token, nothing is written and the reply
 * is {'lost', generation} unless the generation's ~meta `owner` is that token; with the create
 * flag the ~meta may also not exist yet, and the token is then written into it. A shadow is thus
 * only ever written by the rebuild that created it: once Redis loses the data (the ~meta goes
 * with it) or the number is handed to another rebuild, the first rebuild's applies are refused.
 * Applied to the active generation, nothing is written and the reply is {'version', generation,
 * storedVersion} when that generation was built by another version of the projection's
 * definition than ARGV[3] (a notifier of another release, or a replay, built it): one release's
 * ops never land on another's values.
 *
 * Pass 1 (no writes): resolve the generation, read the last applied seq, and walk the batch with
 * the same seq guard the write pass will use, checking that every op's key holds a compatible
 * type (tracking the types earlier ops of the batch will leave). Any problem returns
 * {'invalid', seq, opIndex, key, type, op} before a single write, so a batch is all or nothing.
 * Pass 2 writes the ops of every event whose seq is above the last applied one and stores the
 * highest applied seq in the generation's ~meta hash.
 * Returns {'ok', generation, applied, skipped, lastSeq}.
 */
export const applyScript = new LuaScript(
  'apply',
  `${ITEM_HELPERS}
local base = ARGV[1]
local gen = nil
local initPointer = false
if ARGV[2] == 'active' then
  gen = redis.call('GET', KEYS[1])
  if not gen then
    gen = tostring((tonumber(redis.call('GET', KEYS[2]) or '0')) + 1)
    initPointer = true
  end
else
  gen = ARGV[2]
end
local ns = base .. ':g' .. gen .. ':'
local metaKey = ns .. '~meta'
local owner = ARGV[6]
if owner and owner ~= '' then
  local held = redis.call('HGET', metaKey, 'owner')
  if held ~= owner and not (ARGV[7] == '1' and redis.call('EXISTS', metaKey) == 0) then
    return { 'lost', gen }
  end
else
  owner = nil
end
local meta = redis.call('HMGET', metaKey, 'seq', 'version')
if ARGV[2] == 'active' and not initPointer and meta[2] and tonumber(meta[2]) ~= tonumber(ARGV[3]) then
  return { 'version', gen, meta[2] }
end
local lastRaw = meta[1] or '0'
local last = tonumber(lastRaw)
if ARGV[5] and ARGV[5] ~= '' and tonumber(ARGV[5]) ~= last then
  return { 'moved', gen, lastRaw }
end
local batch = cjson.decode(ARGV[4])

local collection = { hset = 'hash', hdel = 'hash', zadd = 'zset', zrem = 'zset', sadd = 'set', srem = 'set' }
local creates = { hset = true, zadd = true, sadd = true }
local simulated = {}
local function typeOf(key)
  local t = simulated[key]
  if t == nil then
    t = redis.call('TYPE', key)['ok']
    simulated[key] = t
  end
  return t
end
local guard = last
for _, ev in ipairs(batch) do
  local seq = tonumber(ev[1])
  if seq > guard then
    guard = seq
    for j, op in ipairs(ev[2]) do
      local o = op['o']
      if o == 'del' then
        simulated[ns .. op['k']] = 'none'
      elseif o == 'set' then
        simulated[ns .. op['k']] = 'string'
      elseif collection[o] then
        local key = ns .. op['k']
        local t = typeOf(key)
        if t ~= 'none' and t ~= collection[o] then return { 'invalid', ev[1], j - 1, op['k'], t, o } end
        if creates[o] then simulated[key] = collection[o] end
      elseif o == 'iput' or o == 'ipatch' or o == 'irem' then
        local key = ns .. '~items:' .. op['st'] .. ':doc:' .. op['id']
        local t = typeOf(key)
        if t ~= 'none' and t ~= 'hash' then return { 'invalid', ev[1], j - 1, key, t, o } end
      else
        return { 'invalid', ev[1], j - 1, '', 'unknown', tostring(o) }
      end
    end
  end
end

if initPointer then
  redis.call('SET', KEYS[2], gen)
  redis.call('SET', KEYS[1], gen)
end
local applied, skipped = 0, 0
local lastApplied = nil
for _, ev in ipairs(batch) do
  local seq = tonumber(ev[1])
  if seq <= last then
    skipped = skipped + 1
  else
    last = seq
    lastApplied = ev[1]
    applied = applied + 1
    for _, op in ipairs(ev[2]) do
      local o = op['o']
      if o == 'hset' then redis.call('HSET', ns .. op['k'], unpack(op['a']))
      elseif o == 'hdel' then redis.call('HDEL', ns .. op['k'], unpack(op['a']))
      elseif o == 'del' then redis.call('DEL', ns .. op['k'])
      elseif o == 'set' then redis.call('SET', ns .. op['k'], op['v'])
      elseif o == 'zadd' then redis.call('ZADD', ns .. op['k'], op['s'], op['m'])
      elseif o == 'zrem' then redis.call('ZREM', ns .. op['k'], unpack(op['a']))
      elseif o == 'sadd' then redis.call('SADD', ns .. op['k'], unpack(op['a']))
      elseif o == 'srem' then redis.call('SREM', ns .. op['k'], unpack(op['a']))
      else
        local store, id = op['st'], op['id']
        local key = ns .. '~items:' .. store .. ':doc:' .. id
        local old = readDoc(key)
        if o == 'iput' then
          if old then unindex(ns, store, id, old) end
          redis.call('DEL', key)
          redis.call('HSET', key, unpack(op['a']))
          index(ns, store, id, readDoc(key))
        elseif o == 'ipatch' then
          local w = op['w']
          if old and (w == nil or old[w[1]] == w[2]) then
            unindex(ns, store, id, old)
            if #op['a'] > 0 then redis.call('HSET', key, unpack(op['a'])) end
            if #op['u'] > 0 then redis.call('HDEL', key, unpack(op['u'])) end
            index(ns, store, id, readDoc(key))
          end
        elseif o == 'irem' then
          if old then
            unindex(ns, store, id, old)
            redis.call('DEL', key)
          end
        end
      end
    end
  end
end
if lastApplied then redis.call('HSET', metaKey, 'seq', lastApplied) end
if owner and ARGV[7] == '1' then redis.call('HSET', metaKey, 'owner', owner) end
redis.call('HSETNX', metaKey, 'version', ARGV[3])
return { 'ok', gen, applied, skipped, lastApplied or lastRaw }
`,
);

/**
 * Compare-and-set the active generation.
 * KEYS: active pointer. ARGV: base, expected current generation ('' when none), new generation,
 * optionally the rebuild's owner token of the new generation, and '1' to replace an active
 * generation that is ahead (it was built from a stream that is gone: a recreated events stream).
 * Returns {'lost'} when a token is given and the new generation's ~meta does not hold it (Redis lost
 * the shadow, or it is another rebuild's now), {'conflict', current} when the pointer moved
 * (another rebuild won), {'behind', shadowSeq, activeSeq} when the new generation has applied less
 * of the stream than the active one (by more than ARGV[6], when given: a hand-over, the live
 * applier applies the difference), else {'swapped', previous, shadowSeq, activeSeq}.
 */
export const swapScript = new LuaScript(
  'swap',
  `
local base = ARGV[1]
if ARGV[4] and ARGV[4] ~= '' and redis.call('HGET', base .. ':g' .. ARGV[3] .. ':~meta', 'owner') ~= ARGV[4] then
  return { 'lost' }
end
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[2] then return { 'conflict', current } end
local shadowSeq = redis.call('HGET', base .. ':g' .. ARGV[3] .. ':~meta', 'seq') or '0'
local activeSeq = '0'
if current ~= '' then activeSeq = redis.call('HGET', base .. ':g' .. current .. ':~meta', 'seq') or '0' end
local handOver = tonumber(ARGV[6] or '') or -1
if ARGV[5] ~= '1' and tonumber(shadowSeq) + math.max(handOver, 0) < tonumber(activeSeq) then return { 'behind', shadowSeq, activeSeq } end
redis.call('SET', KEYS[1], ARGV[3])
if current ~= '' then redis.call('SADD', base .. ':retired', current) end
return { 'swapped', current, shadowSeq, activeSeq }
`,
);

/**
 * Delete keys of a rebuild's shadow generation, only while the shadow is still that rebuild's and
 * not active (a generation number may be handed out again once Redis lost its data).
 * KEYS: active pointer. ARGV: base, generation, owner token, '1' to delete the ~meta too (last),
 * keys to delete (keys outside the generation's namespace, and its ~meta, are ignored).
 * Returns {'lost'} (nothing deleted) when the shadow is active or not that owner's, else
 * {'ok', deleted}.
 */
export const dropShadowScript = new LuaScript(
  'drop-shadow',
  `
local gen = ARGV[2]
local ns = ARGV[1] .. ':g' .. gen .. ':'
local metaKey = ns .. '~meta'
if redis.call('GET', KEYS[1]) == gen or redis.call('HGET', metaKey, 'owner') ~= ARGV[3] then return { 'lost' } end
local batch = {}
for i = 5, #ARGV do
  local key = ARGV[i]
  if key ~= metaKey and string.sub(key, 1, #ns) == ns then batch[#batch + 1] = key end
end
local deleted = 0
if #batch > 0 then deleted = redis.call('UNLINK', unpack(batch)) end
if ARGV[4] == '1' then deleted = deleted + redis.call('UNLINK', metaKey) end
return { 'ok', deleted }
`,
);

/**
 * Unlink a batch of a retired generation's keys and add how many this call removed to the
 * generation's shared count of deleted keys, atomically: every deleter of the generation (a
 * rebuild's cleanup, another process's `collectAbandoned` running alongside) adds what it removed,
 * each key once, so the count is the generation's whoever deleted which key.
 * KEYS: the count key. ARGV: the count's expiry (ms), keys to unlink...
 * Returns the count so far.
 */
export const dropRetiredScript = new LuaScript(
  'drop-retired',
  `
local deleted = 0
if #ARGV > 1 then deleted = redis.call('UNLINK', unpack(ARGV, 2)) end
local total = redis.call('INCRBY', KEYS[1], deleted)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return total
`,
);

/**
 * Read one key of the active generation with a whitelisted read command, resolving the generation
 * in the same atomic call (so a read never straddles a swap).
 * KEYS: active pointer. ARGV: base, command, relative key, command arguments...
 * Returns {generation or '', reply}.
 */
export const readScript = new LuaScript(
  'read',
  `
local allowed = { GET = true, HGET = true, HGETALL = true, HMGET = true, ZRANGE = true, ZRANGEBYSCORE = true,
  ZREVRANGEBYSCORE = true, ZRANGEBYLEX = true, ZREVRANGE = true, ZSCORE = true, ZCARD = true, SMEMBERS = true, SISMEMBER = true,
  SCARD = true, EXISTS = true, HLEN = true, TYPE = true }
if not allowed[ARGV[2]] then return redis.error_reply('read command not allowed: ' .. ARGV[2]) end
local gen = redis.call('GET', KEYS[1])
if not gen then return { '', false } end
local args = {}
for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
local reply = redis.call(ARGV[2], ARGV[1] .. ':g' .. gen .. ':' .. ARGV[3], unpack(args))
if ARGV[2] == 'TYPE' then reply = reply['ok'] end
return { gen, reply }
`,
);

/**
 * Query or count an item store of the active generation.
 * KEYS: active pointer. ARGV: base, store, order, mode ('query' | 'count' | 'get'), cursor member
 * ('' for the first page) or item id for 'get', limit, filters JSON `[[field, [values...]], ...]`.
 *
 * A page ('query') is keyset paging, and its work is bounded by the page, not by the history the
 * filters match: the field whose value sets are smallest together drives — its sets are merged in
 * order, a batch at a time from just after the cursor member (ZRANGEBYLEX … LIMIT) — and each
 * candidate is checked against the other filters on its document (HMGET, decoded as the indexes
 * decode it: an item has one value per field, so a field's value sets are disjoint). At most ARGV[8]
 * candidates are examined; a page that reaches that bound first ends early, its cursor at the last
 * candidate examined (fewer items, never wrong ones: the next page goes on from there).
 *
 * Counting ('count') writes nothing: with one filtered field it adds up that field's sets; with
 * several, the field whose sets are smallest together drives as a page's does, and each of its
 * members is checked against the other filters on its document — the work is the driver's size (an
 * open count: the open items), where it was a union of whole histories (ZUNIONSTORE of every
 * project's set for a token that sees several) before.
 * Returns {nextCursorMember or '', itemFlat1, itemFlat2, ...} for 'query', the count for 'count'.
 */
export const queryScript = new LuaScript(
  'query',
  `
local base, store, order, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local gen = redis.call('GET', KEYS[1])
if not gen then
  if mode == 'count' then return 0 end
  return { '' }
end
local ns = base .. ':g' .. gen .. ':'
local p = ns .. '~items:' .. store .. ':'
if mode == 'get' then
  return { '', redis.call('HGETALL', p .. 'doc:' .. ARGV[5]) }
end
local filters = cjson.decode(ARGV[7])
local idStart = 18
if order == 'urgent' then idStart = 34 end
-- The driver: the filtered field whose value sets are smallest together (none: every item). An
-- item has one value per field, so a field's value sets are disjoint.
local driver, keys, size = nil, nil, nil
for i, f in ipairs(filters) do
  local fieldKeys, total = {}, 0
  for _, v in ipairs(f[2]) do
    local key = p .. 'idx:' .. order .. ':' .. f[1] .. ':' .. v
    fieldKeys[#fieldKeys + 1] = key
    total = total + redis.call('ZCARD', key)
  end
  if driver == nil or total < size then driver, keys, size = i, fieldKeys, total end
end
-- The other filters, checked on each driver member's document.
local fields, allowed = {}, {}
for i, f in ipairs(filters) do
  if i ~= driver then
    local set = {}
    for _, v in ipairs(f[2]) do set[v] = true end
    fields[#fields + 1] = f[1]
    allowed[#allowed + 1] = set
  end
end
local function passes(member)
  if #fields == 0 then return true end
  local values = redis.call('HMGET', p .. 'doc:' .. string.sub(member, idStart), unpack(fields))
  for i = 1, #fields do
    local raw = values[i]
    local value = raw and cjson.decode(raw)
    if type(value) ~= 'string' or not allowed[i][value] then return false end
  end
  return true
end
if mode == 'query' then
  local limit = tonumber(ARGV[6])
  local budget = tonumber(ARGV[8])
  if driver == nil then keys = { p .. 'all:' .. order } end
  -- Byte order, as ZRANGEBYLEX orders members (Lua's < follows the server's collation locale).
  local function before(a, b)
    local n = math.min(#a, #b)
    for i = 1, n do
      local x, y = string.byte(a, i), string.byte(b, i)
      if x ~= y then return x < y end
    end
    return #a < #b
  end
  local batch = math.max(limit + 1, 16)
  local from = '-'
  if ARGV[5] ~= '' then from = '(' .. ARGV[5] end
  local buffers, at, done = {}, {}, {}
  -- The upper end of the walk (a time window's oldest member), '+' for none.
  local upTo = ARGV[9] or '+'
  local function fill(k, after)
    buffers[k] = redis.call('ZRANGEBYLEX', keys[k], after, upTo, 'LIMIT', 0, batch)
    at[k] = 1
    done[k] = #buffers[k] < batch
  end
  for k = 1, #keys do fill(k, from) end
  local accepted, examined, last = {}, 0, nil
  while #accepted <= limit do
    local best = nil
    for k = 1, #keys do
      if at[k] > #buffers[k] and not done[k] then fill(k, '(' .. buffers[k][#buffers[k]]) end
      local head = buffers[k][at[k]]
      if head ~= nil and (best == nil or before(head, buffers[best][at[best]])) then best = k end
    end
    if best == nil then last = nil break end
    if examined >= budget then break end
    local member = buffers[best][at[best]]
    at[best] = at[best] + 1
    examined = examined + 1
    last = member
    if passes(member) then accepted[#accepted + 1] = member end
  end
  local out = { '' }
  local n = math.min(limit, #accepted)
  for i = 1, n do
    out[#out + 1] = redis.call('HGETALL', p .. 'doc:' .. string.sub(accepted[i], idStart))
  end
  if #accepted > limit then out[1] = accepted[n]
  elseif last ~= nil then out[1] = last end
  return out
end
-- 'count': an item has one value per field, so a field's value sets are disjoint. No filter: every
-- item; one field: the sum of its sets. Several: the field whose sets are smallest together drives,
-- and each of its members is checked against the others on its document, as a page checks its
-- candidates — the work is the driver's size (the open items, for an open count), never a union
-- of whole histories.
if driver == nil then return redis.call('ZCARD', p .. 'all:' .. order) end
if #filters == 1 or size == 0 then return size end
local n = 0
for _, key in ipairs(keys) do
  local from = '-'
  repeat
    local batch = redis.call('ZRANGEBYLEX', key, from, '+', 'LIMIT', 0, 500)
    for _, member in ipairs(batch) do
      if passes(member) then n = n + 1 end
    end
    if #batch > 0 then from = '(' .. batch[#batch] end
  until #batch < 500
end
return n
`,
);

/**
 * Read, in one atomic call, the active generation, its last applied seq and the string values of
 * some of its keys (the folded states an apply is about to build on).
 * KEYS: active pointer. ARGV: base, relative keys...
 * Returns {generation or '', lastSeq, value1 or nil, ...}.
 */
export const loadScript = new LuaScript(
  'load',
  `
local gen = redis.call('GET', KEYS[1])
if not gen then return { '', '0' } end
local ns = ARGV[1] .. ':g' .. gen .. ':'
local out = { gen, redis.call('HGET', ns .. '~meta', 'seq') or '0' }
for i = 2, #ARGV do out[#out + 1] = redis.call('GET', ns .. ARGV[i]) end
return out
`,
);

/** The Redis command of each bulk command code (`image.ts`), in the order the bulk script numbers them. */
const BULK_COMMANDS: Readonly<Record<BulkCode, string>> = { D: 'DEL', S: 'SET', H: 'HSET', HD: 'HDEL', Z: 'ZADD', ZR: 'ZREM', SA: 'SADD', SR: 'SREM' };

/** A command's byte in a bulk payload: its position in {@link BULK_COMMANDS}, from 1 (the script's `names` table). */
export const BULK_CODES = Object.fromEntries(Object.keys(BULK_COMMANDS).map((code, i) => [code, i + 1])) as Readonly<Record<BulkCode, number>>;

/**
 * Write a rebuild's folded chunk into its shadow generation: plain commands, no per-event work.
 * ARGV: namespace (`<base>:g<gen>:`), owner token, last applied seq to record ('' = leave it),
 * definition version ('' = leave it), progress hash key, field and value ('' = none), then the
 * commands as one binary payload, command after command: the command's code (one byte,
 * {@link BULK_CODES}), how many strings follow (the relative key and the
 * arguments; 4 bytes, big-endian), then each string as its length in bytes (4 bytes, big-endian)
 * and its bytes. Nothing in it is escaped or parsed as text: values are JSON texts full of quotes,
 * and a JSON payload of them cost the client an escape and an encode of every byte and Redis a
 * decode (`rebuilder.ts` `encodeCalls`). Keys are always inside the namespace. Nothing is
 * written, and the reply is {'lost'}, unless the generation's ~meta holds the owner token: once
 * Redis lost the shadow (a flush, a failover) or the number went to another rebuild, a chunk is
 * refused whole, exactly as the apply script refuses an event. The seq and the progress are
 * written last, so a seq in the meta means everything up to it is in the shadow. Returns
 * {'ok', commands run}.
 */
export const bulkScript = new LuaScript(
  'bulk',
  `
local ns = ARGV[1]
local meta = ns .. '~meta'
if redis.call('HGET', meta, 'owner') ~= ARGV[2] then return { 'lost' } end
local names = { ${Object.values(BULK_COMMANDS)
    .map((name) => `'${name}'`)
    .join(', ')} }
local payload = ARGV[8]
local size = #payload
local pos = 1
local count = 0
local code, strings, key
while pos <= size do
  code, strings, pos = struct.unpack('>BI4', payload, pos)
  local name = names[code]
  if not name then return redis.error_reply('bulk: unknown command code ' .. tostring(code)) end
  key, pos = struct.unpack('>I4c0', payload, pos)
  local args = {}
  for i = 1, strings - 1 do args[i], pos = struct.unpack('>I4c0', payload, pos) end
  redis.call(name, ns .. key, unpack(args))
  count = count + 1
end
if ARGV[3] ~= '' then redis.call('HSET', meta, 'seq', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSETNX', meta, 'version', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', ARGV[5], ARGV[6], ARGV[7]) end
return { 'ok', count }
`,
);

/**
 * The shape of keys in two namespaces, for a comparison of generations: per relative key, each
 * side's type and size (bytes of a string, fields of a hash, members of a set or sorted set,
 * elements of a list). O(1) per key. ARGV: namespace A, namespace B, relative keys... Returns a
 * flat list `typeA, sizeA, typeB, sizeB` per key.
 */
export const keyShapesScript = new LuaScript(
  'key-shapes',
  `
local sizeOf = { string = 'STRLEN', hash = 'HLEN', set = 'SCARD', zset = 'ZCARD', list = 'LLEN' }
local out = {}
for i = 3, #ARGV do
  for side = 1, 2 do
    local key = ARGV[side] .. ARGV[i]
    local t = redis.call('TYPE', key)['ok']
    out[#out + 1] = t
    out[#out + 1] = sizeOf[t] and redis.call(sizeOf[t], key) or 0
  end
end
return out
`,
);

/**
 * Compare small keys of two namespaces inside Redis (the caller bounds the work of one call by the
 * keys' sizes). ARGV: namespace A, namespace B, relative keys... Each side's value is put in a
 * canonical form — a string as is; hash fields and set members sorted; a sorted set in its own
 * order with its scores — and the two compared. Returns the keys that differ.
 */
export const compareKeysScript = new LuaScript(
  'compare-keys',
  `
local function framed(list)
  local out = {}
  for i, item in ipairs(list) do out[i] = #item .. ':' .. item end
  return table.concat(out)
end
local function canonical(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then return '' end
  if t == 'string' then return 's' .. redis.call('GET', key) end
  if t == 'hash' then
    local flat = redis.call('HGETALL', key)
    local fields = {}
    local values = {}
    for i = 1, #flat, 2 do fields[#fields + 1] = flat[i]; values[flat[i]] = flat[i + 1] end
    table.sort(fields)
    local out = {}
    for _, f in ipairs(fields) do out[#out + 1] = f; out[#out + 1] = values[f] end
    return 'h' .. framed(out)
  end
  if t == 'set' then
    local members = redis.call('SMEMBERS', key)
    table.sort(members)
    return 'e' .. framed(members)
  end
  if t == 'zset' then return 'z' .. framed(redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')) end
  if t == 'list' then return 'l' .. framed(redis.call('LRANGE', key, 0, -1)) end
  return t
end
local differ = {}
for i = 3, #ARGV do
  if canonical(ARGV[1] .. ARGV[i]) ~= canonical(ARGV[2] .. ARGV[i]) then differ[#differ + 1] = ARGV[i] end
end
return differ
`,
);

/**
 * Compare one slice (by rank) of a large sorted set or list in two namespaces: whether elements
 * `start..stop` (and, for a sorted set, their scores) are the same. ARGV: key A, key B, 'zset' or
 * 'list', start, stop. Returns 1 when equal, else 0.
 */
export const compareSliceScript = new LuaScript(
  'compare-slice',
  `
local a, b
if ARGV[3] == 'zset' then
  a = redis.call('ZRANGE', ARGV[1], ARGV[4], ARGV[5], 'WITHSCORES')
  b = redis.call('ZRANGE', ARGV[2], ARGV[4], ARGV[5], 'WITHSCORES')
else
  a = redis.call('LRANGE', ARGV[1], ARGV[4], ARGV[5])
  b = redis.call('LRANGE', ARGV[2], ARGV[4], ARGV[5])
end
if #a ~= #b then return 0 end
for i = 1, #a do if a[i] ~= b[i] then return 0 end end
return 1
`,
);

/**
 * Copy keys of the active generation, as they stand at one sequence, into a scratch generation
 * (`verify` under live traffic: the live side of a comparison that must not move while the fold is
 * brought to the same sequence). One call is atomic, so no apply lands between the sequence read
 * and the copies. KEYS: the active pointer. ARGV: base, scratch generation, its owner token, most
 * elements to copy in all, the active generation the members were found in, the number of whole
 * keys, those relative keys..., then per key frozen member by member: its relative key, its type
 * (`zset`, `set`, `hash`), the number of members, those members...
 *
 * Each whole key is copied (DUMP / RESTORE: any type) to `<scratch ns>~tmp:frozen:<key>`; a key the
 * live side lacks leaves no copy. Of a key frozen member by member only the members named are
 * copied, into a key of the same type there (a member the live side lacks is not copied: absent).
 * Returns {'frozen', active generation, its seq, whole keys copied, then per member-frozen key 1 or
 * 0: whether the live side held it}; {'lost'} when the scratch generation is not that owner's
 * (nothing written); {'none'} without an active generation; {'moved', active} (nothing written)
 * when members are named and the active generation is another one, or such a key is of another
 * type now; {'large', elements} (nothing written) when the whole keys' elements (a string counts
 * 1) and the members named come to more than allowed.
 */
export const freezeLiveScript = new LuaScript(
  'freeze-live',
  `
local base = ARGV[1]
local into = base .. ':g' .. ARGV[2] .. ':'
if redis.call('HGET', into .. '~meta', 'owner') ~= ARGV[3] then return { 'lost' } end
local active = redis.call('GET', KEYS[1])
if not active or active == '' then return { 'none' } end
local from = base .. ':g' .. active .. ':'
local whole = tonumber(ARGV[6])
local groups = 7 + whole
if groups <= #ARGV and active ~= ARGV[5] then return { 'moved', active } end
local sizeOf = { hash = 'HLEN', set = 'SCARD', zset = 'ZCARD', list = 'LLEN' }
local elements = 0
for i = 7, 6 + whole do
  local key = from .. ARGV[i]
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' then elements = elements + (sizeOf[t] and redis.call(sizeOf[t], key) or 1) end
end
local i = groups
while i <= #ARGV do
  local t = redis.call('TYPE', from .. ARGV[i])['ok']
  if t ~= 'none' and t ~= ARGV[i + 1] then return { 'moved', active } end
  elements = elements + tonumber(ARGV[i + 2])
  i = i + 3 + tonumber(ARGV[i + 2])
end
if elements > tonumber(ARGV[4]) then return { 'large', elements } end
local copied = 0
for i = 7, 6 + whole do
  local copy = into .. '${FROZEN_PREFIX}' .. ARGV[i]
  redis.call('DEL', copy)
  local dumped = redis.call('DUMP', from .. ARGV[i])
  if dumped then
    redis.call('RESTORE', copy, 0, dumped)
    copied = copied + 1
  end
end
local out = { 'frozen', active, redis.call('HGET', from .. '~meta', 'seq') or '0', copied }
i = groups
while i <= #ARGV do
  local source = from .. ARGV[i]
  local t = ARGV[i + 1]
  local last = i + 2 + tonumber(ARGV[i + 2])
  local copy = into .. '${FROZEN_PREFIX}' .. ARGV[i]
  redis.call('DEL', copy)
  out[#out + 1] = redis.call('EXISTS', source)
  -- In pages of 500 members: one read of their state, one write of those the live side holds.
  for first = i + 3, last, 500 do
    local page = {}
    for j = first, math.min(first + 499, last) do page[#page + 1] = ARGV[j] end
    local args = {}
    if t == 'zset' then
      local scores = redis.call('ZMSCORE', source, unpack(page))
      for j, member in ipairs(page) do
        if scores[j] then args[#args + 1] = scores[j]; args[#args + 1] = member end
      end
      if #args > 0 then redis.call('ZADD', copy, unpack(args)) end
    elseif t == 'set' then
      local present = redis.call('SMISMEMBER', source, unpack(page))
      for j, member in ipairs(page) do
        if present[j] == 1 then args[#args + 1] = member end
      end
      if #args > 0 then redis.call('SADD', copy, unpack(args)) end
    else
      local values = redis.call('HMGET', source, unpack(page))
      for j, field in ipairs(page) do
        if values[j] then args[#args + 1] = field; args[#args + 1] = values[j] end
      end
      if #args > 0 then redis.call('HSET', copy, unpack(args)) end
    end
  end
  i = last + 1
end
return out
`,
);

/**
 * One page of a member-by-member comparison of two keys of one type (`verify` finding the members
 * of a large key to freeze): ZSCAN / SSCAN / HSCAN `from` at a cursor, and look each member up in
 * `to`. ARGV: 'zset', 'set' or 'hash', key `from`, key `to`, cursor, COUNT. Returns {next cursor,
 * the members of the page that `to` lacks or holds with another score or value...}.
 */
export const differingMembersScript = new LuaScript(
  'differing-members',
  `
local t, from, to = ARGV[1], ARGV[2], ARGV[3]
local scan = { zset = 'ZSCAN', set = 'SSCAN', hash = 'HSCAN' }
local reply = redis.call(scan[t], from, ARGV[4], 'COUNT', ARGV[5])
local page = reply[2]
local out = { reply[1] }
if #page == 0 then return out end
if t == 'set' then
  local present = redis.call('SMISMEMBER', to, unpack(page))
  for i, member in ipairs(page) do
    if present[i] ~= 1 then out[#out + 1] = member end
  end
  return out
end
local members = {}
for i = 1, #page, 2 do members[#members + 1] = page[i] end
local other = redis.call(t == 'zset' and 'ZMSCORE' or 'HMGET', to, unpack(members))
for i, member in ipairs(members) do
  local mine, theirs = page[i * 2], other[i]
  if not theirs or (t == 'zset' and tonumber(theirs) ~= tonumber(mine)) or (t == 'hash' and theirs ~= mine) then out[#out + 1] = member end
end
return out
`,
);

/** Of the relative keys given, those that do not exist in a namespace. ARGV: namespace, keys... */
export const absentKeysScript = new LuaScript(
  'absent-keys',
  `
local absent = {}
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. ARGV[i]) == 0 then absent[#absent + 1] = ARGV[i] end
end
return absent
`,
);

/**
 * Read several hashes of one generation in one call (a rebuild loading the items a chunk touches
 * that its cache no longer holds). ARGV: namespace, relative keys... Returns one flat
 * field/value array per key (empty when the key does not exist).
 */
export const readHashesScript = new LuaScript(
  'read-hashes',
  `
local out = {}
for i = 2, #ARGV do out[#out + 1] = redis.call('HGETALL', ARGV[1] .. ARGV[i]) end
return out
`,
);

/**
 * Refresh a running rebuild's progress entry (its lease), only while its shadow is still its own.
 * KEYS: none. ARGV: namespace, owner token, progress hash key, field, value.
 * Returns 1, or 0 when the shadow is not that owner's any more (nothing written).
 */
export const touchRebuildScript = new LuaScript(
  'touch-rebuild',
  `
if redis.call('HGET', ARGV[1] .. '~meta', 'owner') ~= ARGV[2] then return 0 end
redis.call('HSET', ARGV[3], ARGV[4], ARGV[5])
return 1
`,
);
