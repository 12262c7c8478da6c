-- SPDX-License-Identifier: Apache-2.0
-- test_stores.lua - elections on every store of tests/harness/stores.py
-- that tests/harness/store_servers.py serves (all but s3 and file, which the
-- main suites cover). The module hands `lock` to libs3lect unchanged; these
-- tests prove that each store's locks elect through it.
--
-- store_servers.py, which scripts/test's suite_lua wraps around
-- scripts/test-lua, starts the servers and says in S3LECT_TEST_STORES per
-- store its lock URL, the options and the variables an elector needs:
-- nothing here is per store. Without it the tests skip.

local T = require "harness"
local s3lect = require "s3lect"

local VM = jit and jit.version or _VERSION
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local RUN_ID = string.format("%s%d%06d", (VM:gsub("[^%w]", "")):lower(), os.time() % 100000,
                             math.random(0, 999999))
local seq = 0
local function unique(prefix)
  seq = seq + 1
  return string.format("%s%s%02d", prefix, RUN_ID, seq)
end

-- The timings these tests ask for (seconds).
local TIMINGS = {
  lease_timeout = 3,
  renew_deadline = 2,
  renew_interval = 0.5,
  frequent_interval = 0.5,
  infrequent_interval = 1,
  request_timeout = 5,
  new_lock_wait = 0, -- each test's lock is new: no leader of it can be running
}
local TAKEOVER_BOUND = 6

local HINT = "run the suite as `python3 tests/harness/store_servers.py --cli build/bin/s3lect -- "
             .. "scripts/with-minio scripts/test-lua` (scripts/test lua does)"

-- S3LECT_TEST_STORES (store_servers.py's lines KIND<TAB>WHAT<TAB>NAME<TAB>VALUE)
-- as a list of { kind, lock (with {key}), options, env, staggered }, in its
-- order; nil without it. Raises on a line it cannot read.
local function test_stores()
  local text = os.getenv("S3LECT_TEST_STORES")
  if text == nil or text == "" then
    return nil
  end
  local out, index = {}, {}
  for line in text:gmatch("[^\n]+") do
    local kind, what, name, value = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    if not kind then
      error("S3LECT_TEST_STORES: a line without 4 fields: " .. line)
    end
    local st = index[kind]
    if not st then
      st = { kind = kind, options = {}, env = {}, staggered = false }
      index[kind] = st
      out[#out + 1] = st
    end
    if what == "lock" then
      st.lock = value
    elseif what == "staggered" then
      st.staggered = value == "1"
    elseif what == "option" then
      st.options[name] = value
    elseif what == "env" then
      st.env[name] = value
    else
      error("S3LECT_TEST_STORES: unknown setting " .. what .. " in " .. line)
    end
  end
  for _, st in ipairs(out) do
    if not (st.lock and st.lock:find("{key}", 1, true)) then
      error("S3LECT_TEST_STORES: store " .. st.kind .. " has no lock URL with {key}")
    end
  end
  return out
end

-- The store's lock URL for the lock name key.
local function lock_for(st, key)
  local i, j = st.lock:find("{key}", 1, true)
  return st.lock:sub(1, i - 1) .. key .. st.lock:sub(j + 1)
end

-- The store of that kind, or skips the test.
local function need_store(kind)
  local stores = test_stores()
  if stores == nil then
    T.skip("the stores' test servers are not configured (S3LECT_TEST_STORES unset): " .. HINT)
  end
  for _, st in ipairs(stores) do
    if st.kind == kind then
      return st
    end
  end
  T.skip("S3LECT_TEST_STORES has no " .. kind .. " store")
end

local function leaders_of(els)
  local out = {}
  for _, el in ipairs(els) do
    if el:is_leader() then
      out[#out + 1] = el
    end
  end
  return out
end

-- Two electors on each store's lock: one leader, then a graceful handover.
local STORES = test_stores()
if STORES == nil then
  T.test("stores: two electors on each store's lock, one leader, graceful handover", function()
    T.skip("the stores' test servers are not configured (S3LECT_TEST_STORES unset): " .. HINT)
  end)
end
for _, st in ipairs(STORES or {}) do
  local kind = st.kind
  T.test("stores: two electors on a " .. kind .. " lock, one leader, graceful handover", function(t)
    for name, value in pairs(st.env) do
      T.ok(os.getenv(name) == value, "store %s needs %s as store_servers.py set it; something "
           .. "between changed it", kind, name)
    end
    local lock, extra, staggered = lock_for(st, unique("lua")), st.options, st.staggered
    local ids, seen, lost, by_id = { "a", "b" }, {}, {}, {}
    local els = {}
    for i, id in ipairs(ids) do
      seen[id], lost[id] = {}, {}
      local o = {
        lock = lock,
        id = id,
        on_leader_change = function(leader)
          seen[id][#seen[id] + 1] = leader
        end,
        on_lose = function(term, reason)
          lost[id][#lost[id] + 1] = { term = term, reason = reason }
        end,
      }
      for k, v in pairs(TIMINGS) do
        o[k] = v
      end
      for k, v in pairs(extra) do
        o[k] = v
      end
      local el, err = s3lect.new(o)
      T.ok(el, "s3lect.new for %s: %s", lock, tostring(err))
      t:defer(function()
        el:close() -- stops (releasing) if still running; idempotent
      end)
      els[i], by_id[id] = el, el
    end
    if staggered then
      assert(els[1]:start())
      T.drive({ els[1] }, function()
        return els[1]:is_leader()
      end, 30, "a to lead " .. lock)
      assert(els[2]:start())
    else
      for _, el in ipairs(els) do -- both race to create the lock item / row
        assert(el:start())
      end
    end
    -- T.drive fails the test as soon as two electors lead at once.
    T.drive(els, function()
      return #leaders_of(els) == 1
    end, 30, "one of two electors to lead " .. lock)
    local leader = leaders_of(els)[1]
    local lid = leader:leader_id()
    local fid = lid == "a" and "b" or "a"
    local follower = by_id[fid]
    T.ok(by_id[lid] == leader, "the leader's leader_id() is %s, not its own id", tostring(lid))
    local term = leader:term()
    T.ok(term >= 1, "leader term %s", tostring(term))
    T.drive(els, function()
      return follower:leader_id() == lid
    end, 15, fid .. " to see " .. lid .. " as leader")
    -- Several renewals and polls later: the same single leader.
    T.settle(els, 3)
    T.ok(leader:is_leader() and not follower:is_leader(), "leadership moved while nothing disturbed it")
    T.eq(follower:term(), term, fid .. "'s term()")
    T.eq(seen[fid][#seen[fid]], lid, fid .. "'s last on_leader_change leader id")

    -- Graceful stop: the lock is released and the follower takes over.
    local t0 = T.now()
    assert(leader:stop())
    T.eq(leader:is_leader(), false, lid .. ":is_leader() after stop")
    T.eq(#lost[lid], 1, lid .. "'s on_lose calls")
    T.eq(lost[lid][1].reason, "stopped", "on_lose reason")
    T.eq(lost[lid][1].term, term, "on_lose term")
    T.drive({ follower }, function()
      return follower:is_leader()
    end, TAKEOVER_BOUND + 4, fid .. " to take over after " .. lid .. " stopped")
    local took = T.now() - t0
    io.stdout:write(string.format("(%s took over in %.2fs) ", fid, took))
    T.ok(took < TAKEOVER_BOUND, "takeover after a graceful stop took %.1f s", took)
    T.eq(follower:term(), term + 1, "term after the handover")
    T.eq(follower:leader_id(), fid, fid .. ":leader_id() after taking over")
    T.eq(#lost[fid], 0, fid .. "'s on_lose calls")
  end)
end

-- PostgreSQL's own: the other stores' missing tables are tested elsewhere.
T.test("stores: a postgres lock on a missing table reports a clear fatal error", function(t)
  local st = need_store("postgres")
  local tbl = unique("nosuch_")
  local o = { lock = lock_for(st, "leader&table=" .. tbl), id = "a" }
  for k, v in pairs(st.options) do
    o[k] = v
  end
  for k, v in pairs(TIMINGS) do
    o[k] = v
  end
  local el = assert(s3lect.new(o))
  t:defer(function()
    el:close()
  end)
  assert(el:start())
  local st
  T.drive({ el }, function()
    st = el:status()
    return st.consecutive_failures > 0
  end, 15, "the first failure on a missing table")
  T.eq(st.last_error, s3lect.EFATAL, "status().last_error")
  T.contains(st.last_error_message, tbl, "status().last_error_message")
  T.contains(st.last_error_message, "init-store", "status().last_error_message")
  T.eq(el:is_leader(), false, "is_leader() on a missing table")
end)
