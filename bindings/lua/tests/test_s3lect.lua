-- SPDX-License-Identifier: Apache-2.0
-- test_s3lect.lua - the s3lect Lua module against a real MinIO (and the
-- file store). Run through run.lua under lua5.4 and luajit; see
-- scripts/test-lua.

local T = require "harness"
local s3lect = require "s3lect"

local VM = jit and jit.version or _VERSION
local IS_54 = _VERSION == "Lua 5.4"
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

local ENDPOINT = os.getenv("S3LECT_TEST_ENDPOINT")
local BUCKET = os.getenv("S3LECT_TEST_BUCKET")
local ACCESS_KEY = os.getenv("AWS_ACCESS_KEY_ID")
local SECRET_KEY = os.getenv("AWS_SECRET_ACCESS_KEY")

math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local RUN_ID = string.format("%s-%d-%06d", (VM:gsub("[^%w]", "")), os.time(), math.random(0, 999999))

-- Timings short enough for quick tests, in seconds (DESIGN §4 names).
local FAST = {
  lease_timeout = 3,
  renew_interval = 0.5,
  renew_deadline = 2.5, -- 2 s of retries before a slow store costs the lease
  frequent_interval = 0.5,
  infrequent_interval = 1,
  request_timeout = 5,
  peer_timeout = 2,
  new_lock_wait = 0, -- each test's lock is new: no leader of it can be running
}

-- A longer lease, to tell "released at once" from "taken over after expiry".
local SLOW_LEASE = {
  lease_timeout = 10,
  renew_interval = 1,
  renew_deadline = 6,
  frequent_interval = 0.5,
  infrequent_interval = 1,
  request_timeout = 5,
  new_lock_wait = 0,
  peer_timeout = 2,
}

-- S3LECT_LUA_TEST_STORE=file runs the election tests against the file store
-- instead (no MinIO; for quick local runs). The default, and what
-- scripts/test-lua runs, is S3 against MinIO.
local STORE = os.getenv("S3LECT_LUA_TEST_STORE") or "s3"
assert(STORE == "s3" or STORE == "file", "S3LECT_LUA_TEST_STORE must be s3 or file")

local function need_s3()
  if STORE == "file" then
    return
  end
  local missing = {}
  for _, v in ipairs({ "S3LECT_TEST_ENDPOINT", "S3LECT_TEST_BUCKET", "AWS_ACCESS_KEY_ID",
                       "AWS_SECRET_ACCESS_KEY" }) do
    if not os.getenv(v) then
      missing[#missing + 1] = v
    end
  end
  if #missing > 0 then
    T.fail("the MinIO test server is not configured (" .. table.concat(missing, ", ") ..
           " unset): run the suite as `scripts/with-minio scripts/test-lua`")
  end
end

-- For tests that only make sense against S3.
local function need_real_s3()
  if STORE == "file" then
    T.skip("needs S3; S3LECT_LUA_TEST_STORE=file")
  end
  need_s3()
end

local file_root
local function file_lock(key)
  if not file_root then
    file_root = os.tmpname()
    os.remove(file_root)
    assert(os.execute("mkdir -m 700 '" .. file_root .. "'"))
    T.at_exit(function()
      os.execute("rm -rf '" .. file_root .. "'")
    end)
  end
  return "file://" .. file_root .. "/" .. key:gsub("/", "_")
end

local key_seq = 0
local function new_key(name)
  key_seq = key_seq + 1
  return string.format("lua-tests/%s/%02d-%s", RUN_ID, key_seq, name)
end

-- Options for an S3 elector; extra (callbacks, timings) override.
local function s3_opts(key, id, timings, extra)
  local o
  if STORE == "file" then
    o = { lock = file_lock(key), id = id }
  else
    o = {
      lock = "s3://" .. BUCKET .. "/" .. key,
      id = id,
      endpoint = ENDPOINT,
      region = "us-east-1",
      access_key_id = ACCESS_KEY,
      secret_access_key = SECRET_KEY,
    }
  end
  for k, v in pairs(timings or FAST) do
    o[k] = v
  end
  for k, v in pairs(extra or {}) do
    o[k] = v
  end
  return o
end

-- Creates and starts an elector, closed when the test ends.
local function started(t, opts)
  local el = assert(s3lect.new(opts))
  t:defer(function()
    el:close()
  end)
  assert(el:start())
  return el
end

local function count_leaders(els)
  local n, which = 0, nil
  for i, el in ipairs(els) do
    if el:is_leader() then
      n, which = n + 1, i
    end
  end
  return n, which
end

local function make_tempdir(t)
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -m 700 '" .. path .. "'"))
  t:defer(function()
    os.execute("rm -rf '" .. path .. "'")
  end)
  return path
end

---------------------------------------------------------------------------
-- Module surface and argument checking (no server needed)
---------------------------------------------------------------------------

T.test("module: version and error codes", function()
  local v, n = s3lect.version()
  T.ok(type(v) == "string" and v:match("^%d+%.%d+%.%d+"), "version() = %s", tostring(v))
  T.eq(s3lect._VERSION, v, "_VERSION")
  T.ok(type(n) == "number" and n >= 100, "version number %s", tostring(n))
  T.eq(s3lect.ECALLBACK, -15, "s3lect.ECALLBACK")
  T.eq(s3lect.EAUTH, -7, "s3lect.EAUTH")
  T.ok(#s3lect.strerror(s3lect.EAUTH) > 0, "strerror(EAUTH) is empty")
  local m1 = s3lect.monotonic()
  T.ok(type(m1) == "number" and s3lect.monotonic() >= m1, "monotonic() does not increase")
end)

T.test("misuse raises errors that say what is wrong", function()
  T.raises("table expected", s3lect.new)
  T.raises("table expected", s3lect.new, "s3://b/k")
  local err = T.raises("unknown option 'lease'", s3lect.new, { lock = "/tmp/x", id = "a", lease = 3 })
  T.contains(err, "lease_timeout", "unknown-option message lists the valid names")
  T.raises("'lease_timeout' must be a number of seconds", s3lect.new,
           { lock = "/tmp/x", id = "a", lease_timeout = true })
  -- A string is libs3lect's S3LECT_* syntax: a bare number is refused, as everywhere.
  local bad, msg = s3lect.new({ lock = "/tmp/x", id = "a", lease_timeout = "3" })
  T.eq(bad, nil, "lease_timeout = '3'")
  T.contains(msg, "lease_timeout '3' has no unit", "lease_timeout = '3'")
  T.raises("'on_acquire' must be a function", s3lect.new,
           { lock = "/tmp/x", id = "a", on_acquire = true })
  T.raises("'path_style' must be a boolean", s3lect.new, { lock = "/tmp/x", id = "a", path_style = 1 })
  T.raises("not both", s3lect.new, { lock = "/tmp/x", id = "a", server_id = "b" })
  T.raises("finite", s3lect.new, { lock = "/tmp/x", id = "a", lease_timeout = 1 / 0 })
  T.raises("unknown option 'poll_mode'", s3lect.new, { lock = "/tmp/x", id = "a", poll_mode = false })
end)

T.test("invalid configuration returns nil and a message", function()
  local el, err = s3lect.new({ lock = "/tmp/x", id = "a", lease_timeout = 5, renew_deadline = 6,
                               renew_interval = 1 })
  T.eq(el, nil, "elector for renew_deadline > lease_timeout")
  T.ok(type(err) == "string" and err:find("renew_deadline", 1, true),
       "message should name renew_deadline: %s", tostring(err))
  el, err = s3lect.new({ lock = "/tmp/x" })
  T.eq(el, nil, "elector without an id")
  T.ok(type(err) == "string" and #err > 0, "no message for a missing id")
  el, err = s3lect.new({ lock = "/tmp/x", id = "a", lease_timeout = -1 })
  T.eq(el, nil, "elector with a negative lease")
  T.contains(err, "lease_timeout", "negative lease message")
end)

-- A lock path that is never created (the electors using it never start).
local function unused_lock()
  local p = os.tmpname()
  os.remove(p)
  return p .. ".lock"
end

T.test("closed electors refuse use; close is idempotent", function()
  local el = assert(s3lect.new({ lock = unused_lock(), id = "a" }))
  el:close()
  el:close()
  T.raises("closed", el.start, el)
  T.raises("closed", el.is_leader, el)
  T.contains(tostring(el), "closed", "tostring of a closed elector")
end)

---------------------------------------------------------------------------
-- Elections against MinIO, driven by dispatch from this thread
---------------------------------------------------------------------------

T.test("three electors in one state elect exactly one leader", function(t)
  need_s3()
  local key = new_key("three")
  local acquired, seen = {}, {}
  local els = {}
  for i = 1, 3 do
    local id = "node" .. i
    els[i] = started(t, s3_opts(key, id, FAST, {
      on_acquire = function(term)
        acquired[#acquired + 1] = { id = id, term = term }
      end,
      on_leader_change = function(leader, addr, term)
        seen[id] = { leader = leader, addr = addr, term = term }
      end,
    }))
  end
  T.drive(els, function()
    if #acquired == 0 then
      return false
    end
    for i = 1, 3 do
      local id = "node" .. i
      if id ~= acquired[1].id and (not seen[id] or seen[id].leader ~= acquired[1].id) then
        return false
      end
    end
    return true
  end, 30, "a leader, seen by both followers")
  -- Let several renewals and follower polls happen: still one leader, no flapping.
  T.settle(els, 3)
  T.eq(#acquired, 1, "number of acquisitions")
  local leader = acquired[1]
  for i = 1, 3 do
    local id = "node" .. i
    if id ~= leader.id then
      -- on_leader_change(leader_id, leader_addr, term), as in Python and Go.
      T.eq(seen[id].leader, leader.id, id .. ": first argument is the leader id")
      T.eq(seen[id].term, leader.term, id .. ": third argument is the term")
    end
  end
  local n, which = count_leaders(els)
  T.eq(n, 1, "electors reporting is_leader()")
  T.eq("node" .. which, leader.id, "is_leader() vs on_acquire")
  T.ok(leader.term >= 1, "term %s", tostring(leader.term))
  for i, el in ipairs(els) do
    T.eq(el:leader_id(), leader.id, "leader_id() of node" .. i)
    T.eq(el:term(), leader.term, "term() of node" .. i)
  end
end)

T.test("failover: a crashed leader is replaced after its lease, with term + 1", function(t)
  need_s3()
  local key = new_key("failover")
  local acquired, lost = {}, {}
  local els = {}
  for i = 1, 3 do
    local id = "node" .. i
    els[i] = started(t, s3_opts(key, id, FAST, {
      on_acquire = function(term)
        acquired[#acquired + 1] = { id = id, term = term, index = i }
      end,
      on_lose = function(term, reason)
        lost[#lost + 1] = { id = id, term = term, reason = reason }
      end,
    }))
  end
  T.drive(els, function()
    return #acquired == 1
  end, 30, "the first leader")
  local first = acquired[1]
  local old = els[first.index]
  -- Crash simulation: no released record is written.
  assert(old:stop({ release = false }))
  local stopped_at = T.now()
  T.eq(old:is_leader(), false, "old leader's is_leader() after stop")
  T.eq(#lost, 1, "on_lose calls during stop")
  T.eq(lost[1].reason, "stopped", "lost reason")
  T.eq(lost[1].term, first.term, "lost term")

  local rest = {}
  for i, el in ipairs(els) do
    if i ~= first.index then
      rest[#rest + 1] = el
    end
  end
  T.drive(rest, function()
    return #acquired == 2
  end, 30, "a follower to take over")
  local elapsed = T.now() - stopped_at
  local second = acquired[2]
  T.ok(second.id ~= first.id, "the stopped node acquired again")
  T.eq(second.term, first.term + 1, "term after failover")
  -- The record was not released, so the takeover had to wait for the lease:
  -- 3 s from the follower's first sight of the leader's last write, which
  -- was at most one renew interval (0.5 s + jitter) before the stop.
  T.ok(elapsed >= 2.0, "took over %.2fs after the crash, before the lease could expire", elapsed)
  T.ok(elapsed <= 15, "took over %.2fs after the crash; expected about lease_timeout + "
       .. "frequent_interval (3.5 s)", elapsed)
  T.settle(rest, 2)
  T.eq(#acquired, 2, "acquisitions after settling")
end)

T.test("graceful stop releases at once: handover well before the lease", function(t)
  need_s3()
  local key = new_key("handover")
  local acquired, lost = {}, {}
  local els = {}
  for i = 1, 2 do
    local id = "node" .. i
    els[i] = started(t, s3_opts(key, id, SLOW_LEASE, {
      on_acquire = function(term)
        acquired[#acquired + 1] = { id = id, term = term, index = i }
      end,
      on_lose = function(term, reason)
        lost[#lost + 1] = { id = id, term = term, reason = reason }
      end,
    }))
  end
  T.drive(els, function()
    return #acquired == 1
  end, 30, "the first leader")
  local first = acquired[1]
  local other = els[3 - first.index]
  assert(els[first.index]:stop())
  local stopped_at = T.now()
  T.eq(#lost, 1, "on_lose ran before stop() returned")
  T.eq(lost[1].reason, "stopped", "lost reason")
  T.drive({ other }, function()
    return #acquired == 2
  end, 30, "the other node to take over")
  local elapsed = T.now() - stopped_at
  T.eq(acquired[2].term, first.term + 1, "term after handover")
  T.ok(elapsed <= 6, "handover took %.2fs; a released lock should be taken within a few "
       .. "follower polls, not after the 10 s lease", elapsed)
end)

T.test("__gc of an unreachable elector stops it and releases the lock", function(t)
  need_s3()
  local key = new_key("gc")
  local acquired = {}
  -- Callbacks must not capture the elector, or the registry keeps it alive.
  local a = assert(s3lect.new(s3_opts(key, "gc-a", SLOW_LEASE, {
    on_acquire = function(term)
      acquired[#acquired + 1] = { id = "gc-a", term = term }
    end,
  })))
  assert(a:start())
  T.drive({ a }, function()
    return #acquired == 1
  end, 30, "gc-a to lead")
  local b = started(t, s3_opts(key, "gc-b", SLOW_LEASE, {
    on_acquire = function(term)
      acquired[#acquired + 1] = { id = "gc-b", term = term }
    end,
  }))
  T.settle({ a, b }, 1)
  T.eq(#acquired, 1, "acquisitions before dropping gc-a")
  a = nil -- luacheck: ignore
  collectgarbage()
  collectgarbage()
  local dropped_at = T.now()
  T.drive({ b }, function()
    return #acquired == 2
  end, 30, "gc-b to take over")
  T.eq(acquired[2].id, "gc-b", "new leader")
  T.ok(T.now() - dropped_at <= 6, "takeover after __gc took %.2fs: the lock was not released",
       T.now() - dropped_at)
end)

T.test("__close (Lua 5.4 to-be-closed variable) stops and releases", function(t)
  need_s3()
  if not IS_54 then
    T.skip("to-be-closed variables exist only in Lua 5.4; " .. VM .. " has no __close")
  end
  local key = new_key("close")
  local acquired, lost = {}, {}
  local b
  -- Compiled at run time so that LuaJIT can still parse this file.
  local scope = assert(load([[
    local s3lect, opts, T, inside = ...
    local a <close> = assert(s3lect.new(opts))
    assert(a:start())
    T.drive({ a }, function() return a:is_leader() end, 30, "close-a to lead")
    inside(a)
    return a
  ]], "close-scope"))
  local a = scope(s3lect, s3_opts(key, "close-a", SLOW_LEASE, {
    on_lose = function(term, reason)
      lost[#lost + 1] = { term = term, reason = reason }
    end,
  }), T, function(a)
    b = started(t, s3_opts(key, "close-b", SLOW_LEASE, {
      on_acquire = function(term)
        acquired[#acquired + 1] = { id = "close-b", term = term }
      end,
    }))
    T.settle({ a, b }, 1)
    T.eq(#acquired, 0, "close-b acquisitions while close-a leads")
  end)
  local closed_at = T.now()
  T.eq(#lost, 1, "on_lose calls when the scope closed")
  T.eq(lost[1].reason, "stopped", "lost reason")
  T.raises("closed", a.is_leader, a)
  T.drive({ b }, function()
    return #acquired == 1
  end, 30, "close-b to take over")
  T.ok(T.now() - closed_at <= 6, "takeover after __close took %.2fs", T.now() - closed_at)
end)

---------------------------------------------------------------------------
-- Callbacks: vetoes and errors
---------------------------------------------------------------------------

T.test("on_acquire returning false vetoes leadership", function(t)
  need_s3()
  local key = new_key("veto-false")
  local calls, lost, errors = 0, {}, {}
  local a = started(t, s3_opts(key, "veto", FAST, {
    on_acquire = function()
      calls = calls + 1
      return false
    end,
    on_lose = function(term, reason)
      lost[#lost + 1] = { term = term, reason = reason }
    end,
    on_error = function(msg)
      errors[#errors + 1] = msg
    end,
  }))
  T.drive({ a }, function()
    return #lost >= 1
  end, 30, "the veto to be reported as a loss")
  T.ok(calls >= 1, "on_acquire ran %d times", calls)
  T.eq(lost[1].reason, "hook_failed", "lost reason after a veto")
  T.eq(a:is_leader(), false, "is_leader() after a veto")
  for _, m in ipairs(errors) do
    T.ok(not m:find("on_acquire", 1, true), "a plain false veto reported an error: %s", m)
  end
  -- A willing node gets the lock that the vetoing node released.
  local got = {}
  local b = started(t, s3_opts(key, "willing", FAST, {
    on_acquire = function(term)
      got[#got + 1] = term
    end,
  }))
  T.drive({ a, b }, function()
    return #got == 1
  end, 30, "the willing node to lead")
  T.ok(b:is_leader(), "the willing node is not leader")
end)

T.test("an error in on_acquire vetoes and reaches on_error with a traceback", function(t)
  need_s3()
  local key = new_key("veto-error")
  local errors, lost = {}, {}
  local a = started(t, s3_opts(key, "raiser", FAST, {
    on_acquire = function()
      error("boom-in-acquire")
    end,
    on_lose = function(term, reason)
      lost[#lost + 1] = reason
    end,
    on_error = function(msg, code)
      errors[#errors + 1] = { msg = msg, code = code }
    end,
  }))
  T.drive({ a }, function()
    return #errors >= 1 and #lost >= 1
  end, 30, "the error and the veto")
  local e = errors[1]
  T.eq(e.code, s3lect.ECALLBACK, "on_error code for a callback error")
  T.contains(e.msg, "boom-in-acquire", "on_error message")
  T.contains(e.msg, "on_acquire", "on_error message names the callback")
  T.contains(e.msg, "traceback", "on_error message carries a traceback")
  T.eq(lost[1], "hook_failed", "lost reason")
  T.eq(a:is_leader(), false, "is_leader() after a raising on_acquire")
end)

T.test("errors in other callbacks are reported and the elector keeps working", function(t)
  need_s3()
  local key = new_key("cb-errors")
  local errors, acquired, reentry = {}, 0, nil
  local el
  el = started(t, s3_opts(key, "robust", FAST, {
    on_acquire = function()
      acquired = acquired + 1
      -- Re-entering dispatch from a callback is misuse: it raises.
      local ok, err = pcall(el.dispatch, el, 0)
      reentry = ok and "dispatch did not raise" or tostring(err)
    end,
    on_cycle = function()
      error({ "a table, not a string" })
    end,
    on_lose = function()
      error("boom-in-lose")
    end,
    on_error = function(msg, code)
      errors[#errors + 1] = { msg = msg, code = code }
    end,
  }))
  T.drive({ el }, function()
    return acquired == 1 and #errors >= 1
  end, 30, "leadership and a failing on_cycle")
  T.contains(reentry, "inside one of this elector's callbacks", "re-entrant dispatch")
  local saw_table = false
  for _, e in ipairs(errors) do
    if e.msg:find("error object is a table value", 1, true) then
      saw_table = true
      T.eq(e.code, s3lect.ECALLBACK, "code for an on_cycle error")
      T.contains(e.msg, "on_cycle", "message names on_cycle")
    end
  end
  T.ok(saw_table, "no report of the on_cycle error among %d reports", #errors)
  T.ok(el:is_leader(), "leader lost leadership because a callback failed")
  local before = #errors
  assert(el:stop())
  local found = false
  for i = before + 1, #errors do
    found = found or errors[i].msg:find("boom-in-lose", 1, true) ~= nil
  end
  T.ok(found, "the on_lose error during stop() was not reported")
end)

T.test("el:stop() from inside a callback takes effect when dispatch returns", function(t)
  need_s3()
  local key = new_key("stop-in-cb")
  local lost, stop_ret = {}, nil
  local el
  el = started(t, s3_opts(key, "selfstop", FAST, {
    on_acquire = function()
      stop_ret = el:stop()
    end,
    on_lose = function(term, reason)
      lost[#lost + 1] = reason
    end,
  }))
  T.drive({ el }, function()
    return stop_ret ~= nil
  end, 30, "on_acquire to run")
  -- drive() returned after the dispatch that ran on_acquire: the stop ran.
  T.eq(stop_ret, true, "stop() inside a callback")
  T.eq(el:is_leader(), false, "is_leader() after a deferred stop")
  T.eq(el:status().state, "stopped", "state after a deferred stop")
  T.eq(lost[1], "stopped", "lost reason")
end)

T.test("without on_error, callback errors go to stderr", function(t)
  need_s3()
  local dir = make_tempdir(t)
  local interp = arg and arg[-1] or (IS_54 and "lua5.4" or "luajit")
  for _, mode in ipairs({ "no_on_error", "failing_on_error" }) do
    local cmd = string.format("'%s' '%s/child_callback_error.lua' '%s' '%s/lock-%s' 2>&1", interp,
                              here, mode, dir, mode)
    local p = assert(io.popen(cmd, "r"))
    local out = p:read("*a")
    p:close()
    T.contains(out, "CHILD-DONE", mode .. ": child output")
    T.contains(out, "error in on_acquire callback", mode .. ": stderr report")
    T.contains(out, "child-boom", mode .. ": stderr report")
    T.contains(out, "traceback", mode .. ": stderr report")
    if mode == "failing_on_error" then
      T.contains(out, "error in on_error callback", mode .. ": stderr report")
      T.contains(out, "on-error-boom", mode .. ": stderr report")
    end
  end
end)

---------------------------------------------------------------------------
-- Poll-mode integration: fd, status
---------------------------------------------------------------------------

local ffi_poll
do
  local ok, ffi = pcall(require, "ffi")
  if ok then
    ffi.cdef [[
      struct s3lect_test_pollfd { int fd; short events; short revents; };
      int poll(struct s3lect_test_pollfd *fds, unsigned long nfds, int timeout);
    ]]
    ffi_poll = function(fd, timeout_ms)
      local p = ffi.new("struct s3lect_test_pollfd[1]")
      p[0].fd, p[0].events = fd, 1 -- POLLIN
      local n = ffi.C.poll(p, 1, timeout_ms)
      assert(n >= 0, "poll(2) failed")
      return n == 1 and bit.band(p[0].revents, 1) ~= 0
    end
  end
end

T.test("fd() becomes readable when an event is pending", function(t)
  need_s3()
  local key = new_key("fd")
  local ran = {}
  local function note(kind)
    return function()
      ran[#ran + 1] = kind
    end
  end
  local el = started(t, s3_opts(key, "fd", {
    lease_timeout = 6, renew_interval = 2, renew_deadline = 4, frequent_interval = 0.5,
    infrequent_interval = 2, request_timeout = 5,
  }, {
    on_acquire = note("acquire"),
    on_lose = note("lose"),
    on_leader_change = note("leader_change"),
    on_error = note("error"),
    on_cycle = note("cycle"),
  }))
  local fd = el:fd()
  T.ok(math.type == nil or math.type(fd) == "integer", "fd() is not an integer")
  T.ok(fd >= 0, "fd() = %s", tostring(fd))
  T.eq(el:fd(), fd, "fd() is stable")
  -- Nothing dispatched yet: the fd must turn readable on its own.
  local deadline = T.now() + 30
  local readable = false
  while not readable and T.now() <= deadline do
    readable = s3lect.poll_fd(fd, 200)
  end
  T.ok(readable, "fd() did not become readable within 30 s of start()")
  T.eq(#ran, 0, "callbacks ran without dispatch()")
  if ffi_poll then
    T.ok(ffi_poll(fd, 0), "poll(2) through the LuaJIT FFI does not see the fd readable")
  end
  local n = assert(el:dispatch(0))
  T.ok(n > 0, "dispatch(0) ran %d callbacks while the fd was readable", n)
  T.eq(#ran, n, "callbacks run vs dispatch() count")
  -- Drained: not readable, unless a new event arrived meanwhile, in which
  -- case dispatch must have something to run.
  if s3lect.poll_fd(fd, 0) then
    T.ok(assert(el:dispatch(0)) > 0, "fd readable but nothing to dispatch")
  end
  -- A blocking dispatch returns as soon as the next event arrives.
  local before = #ran
  n = assert(el:dispatch(10000))
  T.ok(n >= 1 and #ran > before, "dispatch(10000) returned %d without running callbacks", n)
  T.raises("number expected", el.dispatch, el, "soon")
end)

T.test("poll_fd() with a list and a timeout", function()
  local a = assert(s3lect.new({ lock = unused_lock(), id = "p" }))
  local ready = assert(s3lect.poll_fd({ a:fd() }, 0))
  T.eq(type(ready), "table", "poll_fd(list) result type")
  T.eq(#ready, 0, "fds ready on a new elector")
  local t0 = s3lect.monotonic()
  T.eq(s3lect.poll_fd(a:fd(), 300), false, "poll_fd(fd) on a quiet elector")
  local waited = s3lect.monotonic() - t0
  T.ok(waited >= 0.25 and waited < 10, "poll_fd(fd, 300) returned after %.3fs", waited)
  t0 = s3lect.monotonic()
  T.eq(assert(a:dispatch(300)), 0, "dispatch(300) on a quiet elector")
  waited = s3lect.monotonic() - t0
  T.ok(waited >= 0.25 and waited < 10, "dispatch(300) returned after %.3fs", waited)
  local ok, err = s3lect.poll_fd(-5, 0)
  T.eq(ok, false, "poll_fd on a negative fd (poll ignores it)")
  T.eq(err, nil, "error for a negative fd")
  a:close()
end)

T.test("status() and status_json() describe the leader", function(t)
  need_s3()
  local key = new_key("status")
  local el = started(t, s3_opts(key, "stat", FAST, {}))
  T.drive({ el }, function()
    return el:is_leader()
  end, 30, "leadership")
  local st = assert(el:status())
  T.eq(st.is_leader, true, "status.is_leader")
  T.eq(st.state, "leader", "status.state")
  T.eq(st.server_id, "stat", "status.server_id")
  T.eq(st.leader_id, "stat", "status.leader_id")
  T.eq(st.term, el:term(), "status.term")
  T.ok(type(st.etag) == "string" and #st.etag > 0, "status.etag = %s", tostring(st.etag))
  T.ok(st.lease_remaining > 0 and st.lease_remaining <= FAST.lease_timeout,
       "status.lease_remaining = %s", tostring(st.lease_remaining))
  T.ok(math.abs(st.last_updated - os.time()) < 120, "status.last_updated = %s",
       tostring(st.last_updated))
  T.eq(st.record_corrupt, false, "status.record_corrupt")
  T.ok(st.cycle >= 1, "status.cycle = %s", tostring(st.cycle))
  local json = assert(el:status_json())
  T.ok(json:find('"isLeader"%s*:%s*true'), "status_json: %s", json)
  T.ok(json:find('"serverID"%s*:%s*"stat"'), "status_json: %s", json)
end)

T.test("update_config() checks the timing rules", function(t)
  need_s3()
  local el = started(t, s3_opts(new_key("update"), "upd", FAST, {}))
  local ok, err = el:update_config({ renew_deadline = 5 })
  T.eq(ok, nil, "update with renew_deadline > lease_timeout")
  T.contains(err, "renew_deadline", "message")
  T.eq(assert(el:update_config({ infrequent_interval = 2 })), true, "valid update")
  T.raises("unknown option 'lock'", el.update_config, el, { lock = "/tmp/y" })
end)

T.test("wrong credentials are reported through on_error", function(t)
  need_real_s3()
  local errors = {}
  local el = started(t, s3_opts(new_key("auth"), "auth", FAST, {
    secret_access_key = "definitely-not-the-secret",
    on_error = function(msg, code)
      errors[#errors + 1] = { msg = msg, code = code }
    end,
  }))
  T.drive({ el }, function()
    return #errors >= 1
  end, 30, "an error event")
  T.eq(errors[1].code, s3lect.EAUTH, "error code (" .. errors[1].msg .. ")")
  T.ok(#errors[1].msg > 0, "empty error message")
  T.ok(not errors[1].msg:find("definitely-not-the-secret", 1, true), "the secret leaked into a message")
  T.eq(el:is_leader(), false, "leader with wrong credentials")
  T.eq(el:status().last_error, s3lect.EAUTH, "status.last_error")
end)

---------------------------------------------------------------------------
-- The file store (no S3): the same API on a local lock
---------------------------------------------------------------------------

T.test("file:// locks elect one leader among two electors", function(t)
  local dir = make_tempdir(t)
  local acquired = {}
  local els = {}
  for i = 1, 2 do
    local id = "f" .. i
    els[i] = started(t, {
      lock = "file://" .. dir .. "/lock", id = id, lease_timeout = 3, renew_interval = 0.5,
      renew_deadline = 2, frequent_interval = 0.5, infrequent_interval = 1,
      on_acquire = function(term)
        acquired[#acquired + 1] = { id = id, term = term }
      end,
    })
  end
  T.drive(els, function()
    return #acquired == 1
  end, 30, "a leader")
  T.settle(els, 2)
  T.eq(#acquired, 1, "acquisitions")
  local n = count_leaders(els)
  T.eq(n, 1, "leaders")
end)

---------------------------------------------------------------------------
-- Peer mode: el:peer_response(), el:peer_port(), el:enable_peer_mode()
---------------------------------------------------------------------------

local PEER_PATH = "/health/leadership"

-- Drives one elector until it leads.
local function lead(el, what)
  T.drive({ el }, function()
    return el:is_leader()
  end, 30, what or "leadership")
end

T.test("peer_response() answers like the leadership endpoint", function(t)
  local dir = make_tempdir(t)
  local el = assert(s3lect.new({
    lock = "file://" .. dir .. "/lock", id = "pr", addr = "127.0.0.1:7443",
    lease_timeout = 3, renew_interval = 0.5, renew_deadline = 2, frequent_interval = 0.5,
    infrequent_interval = 1,
  }))
  t:defer(function()
    el:close()
  end)
  local status, body = el:peer_response()
  T.eq(status, 404, "status before start (" .. tostring(body) .. ")")
  T.contains(body, '"error"', "body before start")
  T.eq(el:peer_port(), 0, "peer_port() without peer mode")

  assert(el:start())
  lead(el)
  status, body = el:peer_response()
  T.eq(status, 200, "status while leading (" .. tostring(body) .. ")")
  T.contains(body, '"leaderID":"pr"', "body")
  T.contains(body, '"leaderAddr":"127.0.0.1:7443"', "body")
  T.ok(body:find('"etag":"[^"]', 1), "no etag in %s", body)
  local term = tonumber(body:match('"term":(%d+)'))
  T.eq(term, el:term(), "term in the body")
  T.ok(term >= 1, "term %s", tostring(term))

  T.eq((el:peer_response(PEER_PATH, "HEAD")), 200, "HEAD")
  status, body = el:peer_response(PEER_PATH, "POST")
  T.eq(status, 405, "POST")
  T.contains(body, "method not allowed", "POST body")
  T.eq((el:peer_response("/elsewhere")), 404, "another path")
  T.eq((el:peer_response(PEER_PATH .. "?wait=soon")), 400, "a wait that is not a number")

  -- A long poll with the current etag ends when the leader renews (0.5 s).
  -- The etag as a JSON string (S3 etags carry quotes, escaped as \").
  local json_etag = select(2, el:peer_response()):match('"etag":"(.-[^\\])"')
  T.ok(json_etag, "etag")
  local etag = json_etag:gsub('\\"', '"')
  local q = etag:gsub("[^%w%-%.]", function(c)
    return string.format("%%%02X", c:byte())
  end)
  local t0 = T.now()
  status, body = el:peer_response(PEER_PATH .. "?wait=20000&etag=" .. q)
  T.eq(status, 200, "long poll status (" .. tostring(body) .. ")")
  T.ok(not body:find(json_etag, 1, true), "the long poll ended without a new etag: %s", body)
  T.ok(T.now() - t0 < 10, "the long poll took %.1f s; renewals are 0.5 s apart", T.now() - t0)

  assert(el:stop())
  T.eq((el:peer_response()), 404, "status after stop")
end)

T.test("peer_response() is 404 on a follower and refused inside callbacks", function(t)
  local dir = make_tempdir(t)
  local inside = {}
  local els = {}
  for i, id in ipairs({ "pa", "pb" }) do
    els[i] = started(t, {
      lock = "file://" .. dir .. "/lock", id = id, lease_timeout = 3, renew_interval = 0.5,
      renew_deadline = 2, frequent_interval = 0.5, infrequent_interval = 1,
      on_leader_change = function()
        inside[#inside + 1] = select(2, pcall(els[i].peer_response, els[i]))
      end,
    })
  end
  T.drive(els, function()
    return count_leaders(els) == 1 and els[1]:leader_id() ~= nil and els[2]:leader_id() ~= nil
        and els[1]:leader_id() == els[2]:leader_id() and #inside >= 2
  end, 30, "one leader both electors know")
  local _, which = count_leaders(els)
  local leader, follower = els[which], els[3 - which]
  T.eq((leader:peer_response()), 200, "leader")
  local status, body = follower:peer_response()
  T.eq(status, 404, "follower")
  T.contains(body, "not the leader", "follower body")
  T.contains(tostring(inside[1]), "inside one of this elector's callbacks", "from a callback")
end)

-- A throwaway CA and a certificate for 127.0.0.1, made with the openssl CLI.
local function make_pki(t)
  local dir = make_tempdir(t)
  local function sh(cmd)
    local ok = os.execute("cd '" .. dir .. "' && " .. cmd .. " >/dev/null 2>&1")
    T.ok(ok == true or ok == 0, "command failed: %s", cmd)
  end
  local ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  sh("openssl req -x509 " .. ec .. " -keyout ca.key -out ca.pem -days 2 -subj '/CN=s3lect lua test CA'"
     .. " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign")
  local ext = assert(io.open(dir .. "/node.ext", "w"))
  ext:write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
  ext:close()
  sh("openssl req -new " .. ec .. " -keyout node.key -out node.csr -subj /CN=127.0.0.1")
  sh("openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
     .. " -out node.pem -extfile node.ext")
  local f = assert(io.open(dir .. "/ca.pem"))
  local ca_text = f:read("*a")
  f:close()
  return { ca = dir .. "/ca.pem", ca_text = ca_text, cert = dir .. "/node.pem", key = dir .. "/node.key" }
end

-- GET over TLS with openssl s_client, verifying the server against ca.
-- Returns the HTTP status and the body.
local function https_get(port, ca, path)
  local cmd = string.format(
    "printf 'GET %s HTTP/1.0\\r\\n\\r\\n' | timeout 20 openssl s_client -quiet -connect 127.0.0.1:%d"
    .. " -CAfile '%s' -verify_return_error -verify_ip 127.0.0.1 2>/dev/null", path, port, ca)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return tonumber(out:match("^HTTP/1%.%d (%d+)")), out:match("\r\n\r\n(.*)$") or out
end

-- Starts an elector whose advertised address is 127.0.0.1:<a free port>;
-- opts(addr) gives its options. Ports are picked at random and retried.
local function start_peer(t, opts)
  for _ = 1, 20 do
    local port = math.random(20000, 40000)
    local el = assert(s3lect.new(opts("127.0.0.1:" .. port)))
    local ok, err = el:start()
    if ok then
      t:defer(function()
        el:close()
      end)
      return el, port
    end
    el:close()
    T.contains(err, "listen", "start() failed for another reason than a busy port")
  end
  T.fail("no free port found for the peer endpoint in 20 tries")
end

T.test("enable_peer_mode() starts the HTTPS endpoint of a running leader", function(t)
  local pki = make_pki(t)
  local dir = make_tempdir(t)
  -- Before start the options are checked as peer_mode = true would check
  -- them: a certificate needs its key; no certificate is zero-config.
  local before = assert(s3lect.new({ lock = "file://" .. dir .. "/other", id = "b", addr = "127.0.0.1:9",
                                     peer_cert = pki.cert }))
  t:defer(function()
    before:close()
  end)
  local ok, err = before:enable_peer_mode(pki.ca_text)
  T.eq(ok, nil, "enable_peer_mode() before start with peer_cert but no peer_key")
  T.contains(err, "both peer_cert and peer_key", "message")
  T.eq(before:get_config().peer_mode, false, "peer_mode after a refused enable_peer_mode()")
  ok, err = before:enable_peer_mode(dir .. "/missing.pem")
  T.eq(ok, nil, "enable_peer_mode() with a missing file")
  T.contains(err, "cannot open", "message")
  local bare = assert(s3lect.new({ lock = "file://" .. dir .. "/bare", id = "bare", addr = "127.0.0.1:9",
                                   peer_listen = "127.0.0.1:0" }))
  t:defer(function()
    bare:close()
  end)
  assert(bare:enable_peer_mode(pki.ca_text))
  assert(bare:start())
  T.ok(bare:peer_port() > 0, "start() after enable_peer_mode() without a certificate serves "
       .. "the zero-config endpoint (peer_port() %d)", bare:peer_port())
  assert(bare:stop())

  local el, port = start_peer(t, function(addr)
    return {
      lock = "file://" .. dir .. "/lock", id = "late", addr = addr, lease_timeout = 3,
      renew_interval = 0.5, renew_deadline = 2, frequent_interval = 0.5, infrequent_interval = 1,
      peer_cert = pki.cert, peer_key = pki.key, -- paths
    }
  end)
  lead(el)
  T.eq(el:peer_port(), 0, "peer_port() before peer mode")
  assert(el:enable_peer_mode(pki.ca))
  T.eq(el:peer_port(), port, "peer_port() after enable_peer_mode()")
  local status, body = https_get(port, pki.ca, PEER_PATH)
  T.eq(status, 200, "HTTPS status (" .. tostring(body) .. ")")
  T.contains(body, '"leaderID":"late"', "HTTPS body")
  assert(el:stop())
  T.eq(el:peer_port(), 0, "peer_port() after stop")
end)

T.test("peer mode on S3: one leader serves HTTPS, the follower takes over on stop", function(t)
  need_s3()
  local pki = make_pki(t)
  local key = new_key("peer")
  local els, ports = {}, {}
  for i, id in ipairs({ "peer-a", "peer-b" }) do
    els[i], ports[i] = start_peer(t, function(addr)
      return s3_opts(key, id, FAST, {
        addr = addr, peer_mode = true, peer_ca = pki.ca_text, -- PEM text
        peer_cert = pki.cert, peer_key = pki.key,
      })
    end)
    T.eq(els[i]:peer_port(), ports[i], "peer_port() of " .. id)
  end
  T.drive(els, function()
    return count_leaders(els) == 1
  end, 30, "a leader")
  local _, which = count_leaders(els)
  local leader, follower = els[which], els[3 - which]
  T.drive(els, function()
    return follower:status().state == "follower_stable"
  end, 30, "the follower to become stable")
  local status, body = https_get(ports[which], pki.ca, PEER_PATH)
  T.eq(status, 200, "leader over HTTPS (" .. tostring(body) .. ")")
  T.contains(body, '"leaderID":"' .. leader:status().server_id .. '"', "leader's body")
  T.eq((https_get(ports[3 - which], pki.ca, PEER_PATH)), 404, "follower over HTTPS")

  local term = leader:term()
  local t0 = T.now()
  assert(leader:stop())
  T.drive({ follower }, function()
    return follower:is_leader()
  end, 10, "the follower to take over")
  local took = T.now() - t0
  T.ok(took < FAST.lease_timeout, "handover took %.2f s: the release was not noticed", took)
  T.ok(follower:term() > term, "term %s after the handover, was %s", follower:term(), term)
  T.eq(leader:peer_port(), 0, "the stopped leader's endpoint")
end)


---------------------------------------------------------------------------
-- Zero-config peer mode: peer_mode = true and no certificate, no addr
---------------------------------------------------------------------------

-- infrequent_interval is 30 s on purpose: a follower that notices the
-- leader's release within a second can only have heard it through the
-- leader's endpoint (the long poll), not by reading the lock file.
local ZERO_CONFIG = {
  lease_timeout = 3,
  renew_interval = 1,
  renew_deadline = 2,
  frequent_interval = 1,
  infrequent_interval = 30,
  request_timeout = 5,
  peer_mode = true,
}

local PEM_CERT = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
local PEM_KEY = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"

local function with(base, extra)
  local o = {}
  for k, v in pairs(base) do
    o[k] = v
  end
  for k, v in pairs(extra) do
    o[k] = v
  end
  return o
end

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  return data
end

-- True if 127.0.0.1:port accepts a TCP connection within 5 s.
local function tcp_accepts(port)
  local r = os.execute(string.format("timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null",
                                     port))
  return r == true or r == 0
end

T.test("zero-config peer mode: the follower pins the leader's key and takes over on stop", function(t)
  local dir = make_tempdir(t)
  local path = dir .. "/zero-config.json"
  local els = {}
  for i, id in ipairs({ "zc-a", "zc-b" }) do
    local el = assert(s3lect.new(with(ZERO_CONFIG, { lock = "file://" .. path, id = id })))
    t:defer(function()
      el:close()
    end)
    els[i] = el
  end
  T.eq(els[1]:get_config().peer_mode, true, "peer_mode")
  for _, el in ipairs(els) do
    assert(el:start())
  end

  -- (a) one leader.
  T.drive(els, function()
    return count_leaders(els) == 1
  end, 10, "a leader")
  local elected = T.now()
  local _, which = count_leaders(els)
  local leader, follower = els[which], els[3 - which]

  -- (b) its record names its key and its endpoint, which takes connections.
  local rec = read_file(path)
  T.contains(rec, '"leaderID":"' .. leader:status().server_id .. '"', "the record's leaderID")
  local pin = rec:match('"peerKeySha256"%s*:%s*"([^"]*)"')
  T.ok(pin and #pin == 44 and pin:match("^[%w+/]+=$"),
       "peerKeySha256 should be the base64 of a SHA-256 (44 characters): %s", rec)
  local port = rec:match('"leaderAddr"%s*:%s*"127%.0%.0%.1:(%d+)"')
  T.ok(port, "leaderAddr of a file lock should be 127.0.0.1:<port>: %s", rec)
  T.eq(tonumber(port), leader:peer_port(), "leaderAddr's port is the leader's peer_port()")
  T.ok(tcp_accepts(tonumber(port)), "the leader's endpoint 127.0.0.1:%s takes no connection", port)

  -- (d) the follower settles on the leader's endpoint without a failure.
  T.drive(els, function()
    return follower:status().state == "follower_stable"
  end, 10, "the follower to become stable")
  local rest = elected + 3 - T.now()
  if rest > 0 then
    T.settle(els, rest)
  end
  T.ok(leader:is_leader() and not follower:is_leader(), "the leader changed while settling")
  local json = assert(follower:status_json())
  local failures = json:match('"peerFailures"%s*:%s*(%b{})')
  T.ok(failures and failures:find('"tlsPin"', 1, true), "peerFailures with a tlsPin class: %s", json)
  for class, n in failures:gmatch('"(%w+)"%s*:%s*(%d+)') do
    T.eq(tonumber(n), 0, "the follower's peerFailures." .. class)
  end
  T.ok(json:find('"peerLastFailure"%s*:%s*""'), "peerLastFailure: %s", json)

  -- (c) a graceful stop of the leader: the follower leads at once.
  local t0 = T.now()
  assert(leader:stop())
  T.drive({ follower }, function()
    return follower:is_leader()
  end, 10, "the follower to take over")
  local took = T.now() - t0
  T.ok(took <= 1.5, "the takeover took %.2f s: with infrequent_interval 30 s only the peer "
       .. "long poll notices the release this fast", took)
  local after
  T.drive({ follower }, function()
    after = read_file(path)
    return after:find('"leaderID":"' .. follower:status().server_id .. '"', 1, true) ~= nil
  end, 5, "the new leader's record")
  local pin2 = after:match('"peerKeySha256"%s*:%s*"([^"]*)"')
  -- both electors live in this process: one zero-config key for all of them
  T.ok(pin2 and #pin2 == 44 and pin2 == pin, "the new leader's peerKeySha256 is the process's one key: %s", after)
  T.contains(after, '"leaderAddr":"127.0.0.1:' .. follower:peer_port() .. '"', "the new leader's leaderAddr")
end)

T.test("zero-config peer mode: peer_mode alone is valid, half a certificate is not", function(t)
  local dir = make_tempdir(t)
  local lock = "file://" .. dir .. "/checked.json"
  local el = assert(s3lect.new({ lock = lock, id = "alone", peer_mode = true }))
  el:close()
  for _, half in ipairs({ { peer_cert = PEM_CERT }, { peer_key = PEM_KEY } }) do
    local bad, err = s3lect.new(with({ lock = lock, id = "half", peer_mode = true, peer_ca = PEM_CERT },
                                     half))
    if bad then
      bad:close()
    end
    T.eq(bad, nil, "elector with only one of peer_cert and peer_key")
    T.contains(err, "both peer_cert and peer_key", "message")
  end
  local bad, err = s3lect.new({ lock = lock, id = "mtls", peer_mode = true,
                                peer_client_cert = PEM_CERT .. PEM_KEY })
  if bad then
    bad:close()
  end
  T.eq(bad, nil, "elector with peer_client_cert and no certificate")
  T.contains(err, "does not verify clients", "message")
end)


---------------------------------------------------------------------------
-- max_lease_timeout, the renew_timeout reason, the max_clock_skew default
---------------------------------------------------------------------------

T.test("max_lease_timeout round-trips and is bounded by lease_timeout", function(t)
  local dir = make_tempdir(t)
  local lock = "file://" .. dir .. "/lock"
  local el = assert(s3lect.new({ lock = lock, id = "a", lease_timeout = 3, renew_deadline = 2,
                                 renew_interval = 1, max_lease_timeout = 12 }))
  t:defer(function()
    el:close()
  end)
  T.eq(el:get_config().max_lease_timeout, 12, "get_config().max_lease_timeout")
  T.eq(el:get_config().lease_timeout, 3, "get_config().lease_timeout")
  local def = assert(s3lect.new({ lock = lock, id = "b" }))
  t:defer(function()
    def:close()
  end)
  T.eq(def:get_config().max_lease_timeout, 0, "default max_lease_timeout (0 = 4 x lease_timeout)")

  local bad, err = s3lect.new({ lock = lock, id = "c", lease_timeout = 3, renew_deadline = 2,
                                renew_interval = 1, max_lease_timeout = 2 })
  T.eq(bad, nil, "elector with max_lease_timeout below lease_timeout")
  T.contains(err, "max_lease_timeout (2s) must not be less than lease_timeout (3s)", "message")
  bad, err = s3lect.new({ lock = lock, id = "c", max_lease_timeout = 86400.001 })
  T.eq(bad, nil, "elector with max_lease_timeout above a day")
  T.contains(err, "max_lease_timeout must be between 0 ms and 86400000 ms, got 86400001 ms", "message")

  -- update_config checks a new lease against the bound; the bound itself is
  -- fixed (s3lect_update_config does not apply it).
  local ok, uerr = el:update_config({ lease_timeout = 13, renew_deadline = 8, renew_interval = 2 })
  T.eq(ok, nil, "update_config with lease_timeout above max_lease_timeout")
  T.contains(uerr, "max_lease_timeout (12s) must not be less than lease_timeout (13s)", "message")
  T.eq(el:get_config().lease_timeout, 3, "lease_timeout after a refused update")
  T.raises("'max_lease_timeout' cannot change", el.update_config, el, { max_lease_timeout = 20 })
  T.eq(el:get_config().max_lease_timeout, 12, "max_lease_timeout after a refused update")
end)

T.test("max_clock_skew is 0 (the wall-clock rule off) by default", function(t)
  local el = assert(s3lect.new({ lock = unused_lock(), id = "a" }))
  t:defer(function()
    el:close()
  end)
  local cfg = el:get_config()
  T.eq(cfg.max_clock_skew, 0, "default max_clock_skew")
  T.eq(cfg.lease_timeout, 15, "default lease_timeout")
  T.eq(cfg.release_on_stop, true, "default release_on_stop")
end)

T.test("a hostile record (leaseMs 10^15) is taken over after max_lease_timeout", function(t)
  local dir = make_tempdir(t)
  -- The file store keeps the record of file:///dir/key in dir/key.
  local rec = string.format('{"leaderID":"hostile","leaderAddr":"","lastUpdated":"%s",' ..
                            '"term":7,"leaseMs":1000000000000000,"incarnation":"x"}',
                            os.date("!%Y-%m-%dT%H:%M:%S.000Z"))
  local f = assert(io.open(dir .. "/lock.tmp-test", "wb"))
  assert(f:write(rec))
  assert(f:close())
  assert(os.rename(dir .. "/lock.tmp-test", dir .. "/lock"))
  local errors, acquired = {}, {}
  local el = assert(s3lect.new({
    lock = "file://" .. dir .. "/lock", id = "a", lease_timeout = 1, renew_deadline = 0.6,
    renew_interval = 0.2, frequent_interval = 0.1, infrequent_interval = 0.2, max_lease_timeout = 2,
    on_error = function(msg)
      errors[#errors + 1] = msg
    end,
    on_acquire = function(term)
      acquired[#acquired + 1] = term
    end,
  }))
  t:defer(function()
    el:close()
  end)
  local t0 = T.now()
  assert(el:start())
  T.drive({ el }, function()
    return el:is_leader() and #acquired == 1
  end, 10, "the takeover of the hostile record")
  local took = T.now() - t0
  -- The bound is 2 s; without it the default would be 4 x 1 s.
  T.ok(took >= 1.9 and took <= 3.5, "took over after %.2f s, expected about 2 s", took)
  T.eq(el:term(), 8, "term")
  T.eq(acquired[1], 8, "on_acquire term")
  local reported = false
  for _, m in ipairs(errors) do
    reported = reported or m:find("leaseMs 1000000000000000 ms is above max_lease_timeout 2000 ms", 1, true)
  end
  T.ok(reported, "the clamping was not reported: %s", table.concat(errors, " | "))
end)

T.test("renewals that time out end leadership with reason renew_timeout", function(t)
  local dir = make_tempdir(t)
  local lost = {}
  local el = assert(s3lect.new({
    lock = "file://" .. dir .. "/lock", id = "a", lease_timeout = 1.5, renew_deadline = 1,
    renew_interval = 0.3, frequent_interval = 0.2, infrequent_interval = 0.4, request_timeout = 0.3,
    on_lose = function(term, reason)
      lost[#lost + 1] = { term = term, reason = reason }
    end,
  }))
  t:defer(function()
    el:close()
  end)
  assert(el:start())
  lead(el)
  local term = el:term()
  -- Another process holds the file store's lock file (dir/key.lock), so
  -- every store request waits request_timeout and fails (transient).
  local ready = dir .. "/holder-ready"
  local p = assert(io.popen("setsid flock -x '" .. dir .. "/lock.lock' -c 'echo > \"" .. ready ..
                            "\"; exec sleep 10' </dev/null >/dev/null 2>&1 & echo $!"))
  local pid = tonumber(p:read("*l"))
  p:close()
  T.ok(pid, "no pid for the lock holder")
  t:defer(function()
    -- setsid made the holder a process group leader: end it and its sleep.
    os.execute("kill -TERM -- -" .. pid .. " 2>/dev/null")
  end)
  T.drive({ el }, function()
    local r = io.open(ready)
    if r then
      r:close()
    end
    return r ~= nil
  end, 5, "the lock holder to hold the lock")
  local t0 = T.now()
  T.drive({ el }, function()
    return #lost >= 1
  end, 5, "on_lose after the store stopped answering")
  local took = T.now() - t0
  T.eq(lost[1].reason, "renew_timeout", "reason")
  T.eq(lost[1].term, term, "term")
  T.ok(took <= 2.5, "stepped down %.2f s after the store stopped answering; renew_deadline is 1 s", took)
  T.eq(el:is_leader(), false, "is_leader() after on_lose")
end)

T.test("region names are validated", function()
  for _, region in ipairs({ "us east 1", "../../etc", string.rep("x", 65) }) do
    local el, err = s3lect.new({ lock = "s3://bucket/k", id = "a", region = region })
    T.eq(el, nil, "elector with region " .. region)
    T.contains(err, "is not a region name", "message")
  end
  local el = assert(s3lect.new({ lock = "s3://bucket/k", id = "a", region = "eu-west_3",
                                 access_key_id = "AKIDTEST", secret_access_key = "throwaway-test-secret" }))
  el:close()
end)

T.test("s3lect.metrics_text(): the Prometheus exposition of electors", function(t)
  local lock = file_lock(new_key("metrics"))
  local a = started(t, { lock = lock, id = "ma", lease_timeout = 1.5, renew_interval = 0.3,
    renew_deadline = 0.9, frequent_interval = 0.2, infrequent_interval = 0.6 })
  T.drive({ a }, function()
    return a:is_leader()
  end, 10, "ma leads")
  local b = started(t, { lock = lock, id = "mb", lease_timeout = 1.5, renew_interval = 0.3,
    renew_deadline = 0.9, frequent_interval = 0.2, infrequent_interval = 0.6 })
  T.settle({ a, b }, 1.2)
  local text = assert(s3lect.metrics_text(a, b))
  local function has(s)
    return text:find(s, 1, true) ~= nil
  end
  T.ok(has('s3lect_leader{lock="' .. lock .. '",id="ma"} 1\n'), "ma: s3lect_leader 1")
  T.ok(has('s3lect_leader{lock="' .. lock .. '",id="mb"} 0\n'), "mb: s3lect_leader 0")
  T.ok(has("# TYPE s3lect_store_request_duration_seconds histogram"), "histogram family")
  T.ok(s3lect.metrics_text():find("s3lect_credential_fetches_total", 1, true), "no electors")
  T.ok(not pcall(s3lect.metrics_text, "x"), "a non-elector is refused")
end)

return T
