-- SPDX-License-Identifier: Apache-2.0
-- test_testing.lua - the test helpers (docs/testing-your-code.md): mem://
-- locks and a virtual clock, s3lect.clock(), whose c:advance() runs the
-- elections and then the callbacks; the README's ten-line test, a handover
-- and a crash takeover in virtual time, the same run twice, refusals.
-- No server needed.
local s3lect = require "s3lect"
local T = require "harness"

local FAST = { lease_timeout = 0.3, renew_interval = 0.1, renew_deadline = 0.2,
               frequent_interval = 0.05, infrequent_interval = 0.15, new_lock_wait = 0 }

local n = 0
local function fresh_lock(t)
  n = n + 1
  local lock = "mem://lua-test-" .. n
  s3lect.mem_reset(lock)
  t:defer(function() s3lect.mem_reset(lock) end)
  return lock
end

local function node(t, lock, clock, id, log)
  local opts = { lock = lock, id = id, clock = clock,
    on_acquire = function() log[#log + 1] = { clock:now(), id, "acquired" } end,
    on_lose = function() log[#log + 1] = { clock:now(), id, "lost" } end }
  for k, v in pairs(FAST) do opts[k] = v end
  local el = assert(s3lect.new(opts))
  t:defer(function() el:close() end)
  assert(el:start())
  return el
end

T.test("testing: my job runs only while leading (the README's test)", function(t)
  local lock = fresh_lock(t)
  -- bindings/lua/README.md's "Testing your leader logic", as written there.
  local clock, job = s3lect.clock(), false
  local el = assert(s3lect.new{ lock = lock, id = "a", clock = clock,
    lease_timeout = 0.3, new_lock_wait = 0,
    on_acquire = function() job = true end, on_lose = function() job = false end })
  el:start()
  clock:advance(0);   assert(job, "leads at once")
  s3lect.mem_fail(lock, 1e6)                      -- the store goes down
  clock:advance(0.3); assert(not job, "lost: no renewal")
  s3lect.mem_fail(lock, 0)                        -- and comes back
  clock:advance(5);   assert(job, "leads again")
  el:close();         assert(not job, "released")
end)

T.test("testing: handover and crash in virtual time", function(t)
  local lock, clock, log = fresh_lock(t), s3lect.clock(), {}
  local a = node(t, lock, clock, "a", log)
  T.ok(not a:is_leader() and #log == 0, "nothing runs before an advance")
  clock:advance(0)
  T.ok(a:is_leader(), "a leads at 0")
  T.eq(log[1][1], 0, "ACQUIRED at 0")
  local b = node(t, lock, clock, "b", log)
  for _ = 1, 100 do
    clock:advance(0.1)
    T.ok(a:is_leader() and not b:is_leader(), "a leads alone")
  end
  local t0 = clock:now()
  a:stop()
  T.eq(log[#log][3], "lost", "a lost")
  T.eq(clock:now(), t0, "stop moved no time")
  while not b:is_leader() and clock:now() < t0 + 1 do clock:advance(0.01) end
  T.ok(b:is_leader() and clock:now() - t0 <= 0.2 + 1e-9, "b took over the released lock")
  local c = node(t, lock, clock, "c", log)
  clock:advance(1)
  t0 = clock:now()
  b:stop{ release = false } -- a crash: no release
  while not c:is_leader() and clock:now() < t0 + 2 do
    clock:advance(0.005)
    T.ok(not (b:is_leader() and c:is_leader()), "one leader")
  end
  local took = clock:now() - t0
  T.ok(c:is_leader() and took >= 0.2 and took <= 0.75, "c took over after the lease: " .. took)
end)

local function run(t)
  local lock, clock, log = "mem://lua-again", s3lect.clock(1.7e9), {}
  s3lect.mem_reset(lock)
  local els = {}
  for i = 1, 3 do els[i] = node(t, lock, clock, "n" .. i, log) end
  for step = 0, 599 do
    clock:advance(0.1)
    local k = 0
    for _, e in ipairs(els) do if e:is_leader() then k = k + 1 end end
    T.ok(k <= 1, "at most one leader")
    if step % 50 == 49 then
      local i = math.floor(step / 50) % 3 + 1
      els[i]:stop{ release = step % 100 == 49 }
      els[i]:close()
      els[i] = node(t, lock, clock, "n" .. i .. "-" .. step, log)
    end
  end
  for _, e in ipairs(els) do e:close() end
  clock:close()
  return log
end

T.test("testing: the same run twice", function(t)
  local first, second = run(t), run(t)
  T.ok(#first >= 8, "elections happened: " .. #first)
  T.eq(#second, #first, "as many events")
  for i = 1, #first do
    T.eq(table.concat({ first[i][1], first[i][2], first[i][3] }, " "),
         table.concat({ second[i][1], second[i][2], second[i][3] }, " "), "event " .. i)
  end
end)

T.test("testing: refusals", function(t)
  local clock = s3lect.clock()
  local el, err = s3lect.new{ lock = "file:///tmp/s3lect-lua-vclock.json", id = "a", clock = clock }
  T.ok(el == nil, "a virtual clock on a file lock")
  T.contains(err, "mem://", "says why")
  T.raises("must be an open s3lect.clock", s3lect.new, { lock = "mem://x", id = "a", clock = {} })
  T.raises("whole number", s3lect.mem_fail, "mem://x", -1)
  local lock = fresh_lock(t)
  local busy
  local e2 = assert(s3lect.new{ lock = lock, id = "a", clock = clock, new_lock_wait = 0,
    on_acquire = function() busy = select(2, pcall(clock.advance, clock, 1)) end })
  t:defer(function() e2:close() end)
  e2:start()
  clock:advance(0)
  T.contains(tostring(busy), "from a callback", "advance from a callback")
  clock:close()
  T.raises("clock is closed", clock.advance, clock, 1)
  T.ok(e2:is_leader(), "its elector keeps the clock")
end)
