-- SPDX-License-Identifier: Apache-2.0
-- harness.lua - a tiny test harness that runs unchanged under Lua 5.4 and
-- LuaJIT (busted is packaged for Lua 5.1 only on Debian).
--
--   local T = require "harness"
--   T.test("name", function(t) ... t:defer(fn) ... end)
--   os.exit(T.run())
--
-- A test fails when it raises. Cleanups registered with t:defer run in
-- reverse order whether the test passed or not.

local s3lect = require "s3lect"

local T = {}
local tests = {}

function T.test(name, fn)
  tests[#tests + 1] = { name = name, fn = fn }
end

local function fmt(v)
  if type(v) == "string" then
    return string.format("%q", v)
  end
  return tostring(v)
end

function T.eq(got, want, what)
  if got ~= want then
    error(string.format("%s: got %s, want %s", what or "value", fmt(got), fmt(want)), 2)
  end
end

function T.ok(cond, msg, ...)
  if not cond then
    error(string.format(msg or "assertion failed", ...), 2)
  end
  return cond
end

-- Asserts that s contains the plain substring sub.
function T.contains(s, sub, what)
  if type(s) ~= "string" or not s:find(sub, 1, true) then
    error(string.format("%s: %s does not contain %q", what or "string", fmt(s), sub), 2)
  end
end

-- Asserts that fn(...) raises an error whose message contains sub.
function T.raises(sub, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then
    error(string.format("expected an error containing %q, but the call succeeded", sub), 2)
  end
  if not tostring(err):find(sub, 1, true) then
    error(string.format("expected an error containing %q, got: %s", sub, tostring(err)), 2)
  end
  return err
end

-- Fails the running test with a message and no traceback (for setup
-- problems whose message says everything).
function T.fail(msg)
  error({ fail = msg }, 2)
end

local exit_hooks = {}
-- Runs fn after all tests (suite-level cleanup).
function T.at_exit(fn)
  exit_hooks[#exit_hooks + 1] = fn
end

-- Ends the running test as skipped; the reason is printed.
function T.skip(reason)
  error({ skip = reason }, 2)
end

-- Seconds on a monotonic clock (a float).
T.now = s3lect.monotonic

-- Drives electors from this thread the way a host loop would: wait on their
-- fds, dispatch what is pending, and check after every step that at most
-- one of them is leader. Returns when cond() is true; raises after
-- timeout_s seconds with `what` in the message.
function T.drive(electors, cond, timeout_s, what)
  local deadline = T.now() + timeout_s
  while true do
    local fds = {}
    for i, el in ipairs(electors) do
      fds[i] = el:fd()
    end
    s3lect.poll_fd(fds, 100)
    for _, el in ipairs(electors) do
      local n, err = el:dispatch(0)
      assert(n, err)
    end
    local leaders = 0
    for _, el in ipairs(electors) do
      if el:is_leader() then
        leaders = leaders + 1
      end
    end
    if leaders > 1 then
      error(string.format("%d electors are leader at the same time", leaders), 2)
    end
    if cond() then
      return true
    end
    if T.now() > deadline then
      error(string.format("timed out after %ss waiting for %s", timeout_s, what or "condition"), 2)
    end
  end
end

-- Drives electors for `seconds` (checking the one-leader invariant) and
-- returns.
function T.settle(electors, seconds)
  local deadline = T.now() + seconds
  T.drive(electors, function()
    return T.now() >= deadline
  end, seconds + 5, "time to pass")
end

-- Runs every registered test (or those whose name contains `filter`).
-- Returns the process exit status.
function T.run(filter)
  local passed, failed, skipped = 0, 0, 0
  local failures = {}
  for _, tc in ipairs(tests) do
    if filter == nil or tc.name:find(filter, 1, true) then
      local t = { cleanups = {} }
      function t:defer(fn)
        self.cleanups[#self.cleanups + 1] = fn
      end
      io.stdout:write(tc.name, " ... ")
      io.stdout:flush()
      local started = T.now()
      local ok, err = xpcall(function()
        return tc.fn(t)
      end, function(e)
        if type(e) == "table" then
          return e
        end
        return debug.traceback(e, 2)
      end)
      for i = #t.cleanups, 1, -1 do
        local cok, cerr = pcall(t.cleanups[i])
        if not cok and ok then
          ok, err = false, "cleanup failed: " .. tostring(cerr)
        end
      end
      collectgarbage()
      if not ok and type(err) == "table" and err.fail then
        failed = failed + 1
        failures[#failures + 1] = tc.name
        io.stdout:write("FAIL\n    ", tostring(err.fail), "\n")
      elseif not ok and type(err) == "table" and err.skip then
        skipped = skipped + 1
        io.stdout:write("skip (", err.skip, ")\n")
      elseif ok then
        passed = passed + 1
        io.stdout:write(string.format("ok (%.1fs)\n", T.now() - started))
      else
        failed = failed + 1
        failures[#failures + 1] = tc.name
        io.stdout:write("FAIL\n    ", tostring(err):gsub("\n", "\n    "), "\n")
      end
    end
  end
  for i = #exit_hooks, 1, -1 do
    pcall(exit_hooks[i])
  end
  io.stdout:write(string.format("\n%d passed, %d failed, %d skipped\n", passed, failed, skipped))
  for _, name in ipairs(failures) do
    io.stdout:write("  failed: ", name, "\n")
  end
  if passed + failed + skipped == 0 then
    io.stdout:write("no tests matched\n")
    return 1
  end
  return failed == 0 and 0 or 1
end

return T
