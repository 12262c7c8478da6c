-- SPDX-License-Identifier: Apache-2.0
-- test_coroutines.lua - callbacks that yield (a clear error, never a veto)
-- and the pull-style el:next_event() for coroutine-based hosts. File locks
-- only: no server needed.
local s3lect = require "s3lect"
local T = require "harness"

local function tempdir(t)
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -m 700 '" .. path .. "'"))
  t:defer(function()
    os.execute("rm -rf '" .. path .. "'")
  end)
  return path
end

local function new_elector(t, extra)
  local o = {
    lock = "file://" .. tempdir(t) .. "/lock", id = "a", lease_timeout = 3,
    renew_interval = 0.5, renew_deadline = 2, frequent_interval = 0.5, infrequent_interval = 1,
  }
  for k, v in pairs(extra or {}) do
    o[k] = v
  end
  local el = assert(s3lect.new(o))
  t:defer(function()
    el:close()
  end)
  return el
end

-- Runs el:dispatch() for `seconds`, inside a coroutine if in_coroutine;
-- returns the errors it raised.
local function dispatch_for(el, seconds, in_coroutine)
  local errs = {}
  local function loop()
    local deadline = T.now() + seconds
    while T.now() < deadline do
      s3lect.poll_fd(el:fd(), 100)
      local ok, err = pcall(el.dispatch, el, 0)
      if not ok then
        errs[#errs + 1] = err
      end
    end
  end
  if in_coroutine then
    local co = coroutine.create(loop)
    local ok, err = coroutine.resume(co)
    assert(ok, err)
    T.eq(coroutine.status(co), "dead", "the dispatching coroutine ran to its end")
  else
    loop()
  end
  return errs
end

for _, in_coroutine in ipairs({ true, false }) do
  local where = in_coroutine and "from a coroutine" or "on the main thread"
  T.test("an on_acquire that yields " .. where .. " is an error, not a veto", function(t)
    local acquired = {}
    local el = new_elector(t, {
      on_acquire = function(term)
        acquired[#acquired + 1] = term
        coroutine.yield("suspend me")
        acquired[#acquired + 1] = -1 -- never reached
      end,
    })
    assert(el:start())
    -- Long enough for several vetoes and reacquisitions if the yield were
    -- read as a veto (the old behaviour: a new term every ~0.5 s).
    local errs = dispatch_for(el, 3, in_coroutine)
    T.eq(#acquired, 1, "acquisitions (a veto loop acquires again and again)")
    T.ok(el:is_leader(), "the acquisition stands")
    T.eq(el:term(), acquired[1], "term")
    T.eq(#errs, 1, "errors raised by el:dispatch()")
    T.contains(errs[1], "on_acquire callback yielded", "error")
    T.contains(errs[1], "callbacks cannot yield", "error")
    T.contains(errs[1], "el:next_event(", "error")
  end)
end

T.test("an on_lose that yields during el:stop() is reported on stderr, not raised", function(t)
  local lost, cycles = {}, 0
  local el = new_elector(t, {
    on_lose = function(term, reason)
      lost[#lost + 1] = reason
      coroutine.yield()
    end,
    on_cycle = function()
      cycles = cycles + 1
    end,
  })
  assert(el:start())
  T.drive({ el }, function()
    return el:is_leader()
  end, 15, "leadership")
  -- A stop from inside the dispatching coroutine: the yield of on_lose is
  -- reported on stderr by el:stop() (outside dispatch), not raised.
  local co = coroutine.create(function()
    return el:stop()
  end)
  local ok, res = coroutine.resume(co)
  T.ok(ok and res == true, "el:stop() in a coroutine: %s", tostring(res))
  T.eq(lost[1], "stopped", "on_lose ran")
  T.ok(cycles > 0, "on_cycle ran")
end)

T.test("next_event() returns every event in order as a table, nil on timeout", function(t)
  local el = new_elector(t, { events = true })
  T.eq(el:next_event(), nil, "before start")
  assert(el:start())
  local seen = {}
  local deadline = T.now() + 15
  while not el:is_leader() or #seen == 0 or seen[#seen].type ~= "acquired" do
    T.ok(T.now() < deadline, "no acquired event")
    local ev = el:next_event(0.5)
    if ev and ev.type ~= "cycle" then
      seen[#seen + 1] = ev
    end
  end
  local acq = seen[#seen]
  T.eq(acq.term, el:term(), "term of the acquired event")
  -- nil once nothing comes within the timeout (cycle events come every
  -- renew_interval, so try a few times).
  local got_nil = false
  for _ = 1, 20 do
    local t0 = T.now()
    local ev = el:next_event(0.3)
    if ev == nil then
      T.ok(T.now() - t0 >= 0.25, "returned nil after %.2f s, before the timeout", T.now() - t0)
      got_nil = true
      break
    end
    T.ok(ev.type == "cycle" or ev.type == "leader_changed",
         "a leader alone sees cycles (and its own leader change), got %s", ev.type)
    if ev.type == "cycle" then
      T.ok(type(ev.cycle) == "number", "cycle events carry the cycle count")
    else
      T.eq(ev.leader_id, "a", "leader_id of the leader_changed event")
    end
  end
  T.ok(got_nil, "next_event(0.3) never timed out")
  assert(el:stop())
  local rest = {}
  while true do
    local ev = el:next_event(-1) -- until the stopped elector has nothing left
    if ev == nil then
      break
    end
    rest[#rest + 1] = ev
  end
  local lost
  for _, ev in ipairs(rest) do
    if ev.type == "lost" then
      lost = ev
    end
  end
  T.ok(lost, "no lost event after the stop")
  T.eq(lost.reason, "stopped", "reason")
  T.eq(lost.term, acq.term, "term of the lost event")
end)

T.test("next_event() lets a coroutine wait for leadership; callbacks still run", function(t)
  local on_acquire_terms = {}
  local el = new_elector(t, {
    events = true,
    on_acquire = function(term)
      on_acquire_terms[#on_acquire_terms + 1] = term
    end,
  })
  assert(el:start())
  local log = {}
  -- A tiny cooperative host: the worker yields whenever no event is
  -- pending, and the scheduler resumes it when the fd is readable.
  local worker = coroutine.create(function()
    while true do
      local ev = el:next_event(0)
      if ev == nil then
        coroutine.yield("idle")
      elseif ev.type == "acquired" then
        log[#log + 1] = "acquired " .. ev.term
        return ev.term
      end
    end
  end)
  local deadline, term = T.now() + 15, nil
  while not term do
    T.ok(T.now() < deadline, "the worker never saw leadership")
    s3lect.poll_fd(el:fd(), 100)
    local ok, res = coroutine.resume(worker)
    assert(ok, res)
    if res ~= "idle" then
      term = res
    end
  end
  T.eq(term, el:term(), "term")
  T.eq(on_acquire_terms[1], term, "on_acquire ran too")
  T.eq(log[1], "acquired " .. term, "log")
end)

T.test("next_event() needs events = true; events must be a boolean", function(t)
  local el = new_elector(t)
  T.raises("events = true", el.next_event, el)
  T.raises("option 'events' must be a boolean", s3lect.new, { lock = "file:///tmp/x", events = 1 })
  T.raises("NaN", el.next_event, new_elector(t, { events = true }), 0 / 0)
end)
