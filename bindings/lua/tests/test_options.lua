-- SPDX-License-Identifier: Apache-2.0
-- test_options.lua - the module's options are libs3lect's (s3lect.options(),
-- from s3lect_option_info), and it covers every option the library reports.
-- Loaded by run.lua after test_s3lect.lua. No store is contacted: s3lect.new
-- only builds and validates a configuration.

local T = require "harness"
local s3lect = require "s3lect"

-- Library options s3lect.new deliberately does not take (see hidden_options
-- in src/s3lect_lua.c): poll mode is always on in this binding.
local HIDDEN = { poll_mode = true }
-- The integer options that are counts (the shared runtime's sizes,
-- docs/threading.md, and the priority); every other integer option is a
-- duration in ms.
local COUNTS = { max_connections = true, worker_threads = true, callback_threads = true,
                 priority = true }
-- A lock in an existing directory; s3lect.new does not create it.
local LOCK = (os.getenv("TMPDIR") or "/tmp") .. "/s3lect-lua-options-unused-lock"

local function library_options()
  local opts = s3lect.options()
  T.ok(#opts > 0, "s3lect.options() is empty")
  return opts
end

local function new_with(name, value)
  local t = { lock = LOCK, server_id = "a" }
  t[name] = value
  return s3lect.new(t)
end

T.test("s3lect.options() describes the library's options", function()
  local opts = library_options()
  local names = {}
  for i, o in ipairs(opts) do
    T.eq(o.opt, i, "option numbers have no gaps")
    T.ok(type(o.name) == "string" and #o.name > 0, "option %d has no name", i)
    T.ok(not names[o.name], "option name %s twice", o.name)
    names[o.name] = true
    T.ok(o.type == "string" or o.type == "int" or o.type == "bool" or o.type == "bytes",
         "option %s has type %s, which this binding does not know", o.name, tostring(o.type))
    T.ok(o.min <= o.max, "option %s: min %d > max %d", o.name, o.min, o.max)
    -- The unit is libs3lect's fact (s3lect_option_flags): every integer
    -- option has one, ms or count.
    if o.type == "int" then
      T.ok(o.unit == "ms" or o.unit == "count",
           "integer option %s has unit %s: libs3lect must report ms or count", o.name,
           tostring(o.unit))
      T.eq(o.unit == "count", COUNTS[o.name] == true, o.name .. " is a count")
    else
      T.eq(o.unit, nil, "unit of non-integer option " .. o.name)
    end
  end
  for name in pairs(COUNTS) do
    T.ok(names[name], "count option %s is one of the library's", name)
  end
  T.ok(names.lease_timeout and names.lock and names.peer_ca, "well-known options are listed")
  local lt
  for _, o in ipairs(opts) do
    if o.name == "lease_timeout" then
      lt = o
    end
  end
  T.eq(lt.type, "int", "lease_timeout type")
  T.eq(lt.default, 15000, "lease_timeout default (ms)")
  T.eq(lt.min, 100, "lease_timeout min (ms)")
end)

-- A new C option without binding support fails here.
T.test("s3lect.new takes every option the library reports", function()
  local valid = select(2, pcall(s3lect.new, { lock = LOCK, id = "a", no_such_option = 1 }))
  T.contains(valid, "unknown option 'no_such_option'", "unknown option")
  for _, o in ipairs(library_options()) do
    if HIDDEN[o.name] then
      T.raises("unknown option '" .. o.name .. "'", new_with, o.name, false)
    else
      T.contains(valid, o.name, "the valid names of the unknown-option message")
      local value
      if o.type == "int" and o.unit == "count" then
        value = o.default + 1
      elseif o.type == "int" then
        value = (o.default > 0 and o.default + 1 or o.max) / 1000
      elseif o.type == "bool" then
        value = false
      else
        value = o.name == "peer_health_path" and "/v" or "v"
      end
      local ok, el_or_err, msg = pcall(new_with, o.name, value)
      T.ok(ok, "s3lect.new{%s = %s} raised: %s", o.name, tostring(value), tostring(el_or_err))
      T.ok(el_or_err ~= nil, "s3lect.new{%s = %s} refused: %s", o.name, tostring(value),
           tostring(msg))
      local el = el_or_err
      local cfg = el:get_config()
      el:close()
      if o.type == "int" then
        -- Durations are seconds in Lua (ms in C); counts are counts.
        T.eq(cfg[o.name], value, "get_config()." .. o.name .. " after setting it")
      elseif o.type == "bool" then
        T.eq(cfg[o.name], false, "get_config()." .. o.name .. " after setting it")
      end
    end
  end
end)

T.test("defaults and bounds are the library's, in seconds", function()
  local el = assert(s3lect.new({ lock = LOCK, id = "a" }))
  local cfg = el:get_config()
  el:close()
  for _, o in ipairs(library_options()) do
    if o.type == "int" and o.unit == "count" then
      T.eq(cfg[o.name], o.default, "default " .. o.name .. " (a count)")
    elseif o.type == "int" and not HIDDEN[o.name] then
      T.eq(cfg[o.name], o.default / 1000, "default " .. o.name)
      local bad, err = new_with(o.name, (o.max + 1) / 1000)
      T.eq(bad, nil, o.name .. " above its maximum")
      T.contains(err, string.format("%s must be between %d ms and %d ms", o.name, o.min, o.max),
                 o.name .. " above its maximum")
      if o.min > 0 then
        bad, err = new_with(o.name, (o.min - 1) / 1000)
        T.eq(bad, nil, o.name .. " below its minimum")
        T.contains(err, "must be between", o.name .. " below its minimum")
      end
    elseif o.type == "bool" and not HIDDEN[o.name] then
      -- path_style's default -1 is "automatic": get_config leaves it out.
      local want = nil
      if o.default >= 0 then
        want = o.default == 1
      end
      T.eq(cfg[o.name], want, "default " .. o.name)
    end
  end
end)

T.test("count options (max_connections, worker_threads, callback_threads) are integers", function()
  local by_name = {}
  for _, o in ipairs(library_options()) do
    by_name[o.name] = o
  end
  local want = { max_connections = { 1, 1024, 64 }, worker_threads = { 1, 64, 4 },
                 callback_threads = { 1, 64, 2 } }
  for name, mmd in pairs(want) do
    local o = by_name[name]
    T.ok(o ~= nil, "library option %s", name)
    T.eq(o.type, "int", name .. " type")
    T.eq(o.unit, "count", name .. " unit")
    T.eq(o.min, mmd[1], name .. " min")
    T.eq(o.max, mmd[2], name .. " max")
    T.eq(o.default, mmd[3], name .. " default")
  end
  -- All three at once reach the library and read back as counts, not seconds.
  local el = assert(s3lect.new({ lock = LOCK, id = "a", max_connections = 200,
                                 worker_threads = 8, callback_threads = 3 }))
  local cfg = el:get_config()
  el:close()
  T.eq(cfg.max_connections, 200, "get_config().max_connections")
  T.eq(cfg.worker_threads, 8, "get_config().worker_threads")
  T.eq(cfg.callback_threads, 3, "get_config().callback_threads")
  T.eq(math.type and math.type(cfg.worker_threads) or "integer",
       "integer", "worker_threads reads back as an integer")
  -- Bounds: the library's message, with no unit.
  for name, mmd in pairs(want) do
    local bad, err = new_with(name, mmd[2] + 1)
    T.eq(bad, nil, name .. " above its maximum")
    T.contains(err, string.format("option '%s': %s must be between %d and %d, got %d",
                                  name, name, mmd[1], mmd[2], mmd[2] + 1), name .. " above max")
    T.ok(not err:find(" ms", 1, true), "%s's message has no ms: %s", name, err)
    bad, err = new_with(name, 0)
    T.eq(bad, nil, name .. " = 0")
    T.contains(err, string.format("%s must be between %d and %d, got 0", name, mmd[1], mmd[2]),
               name .. " = 0")
    bad, err = new_with(name, -3)
    T.eq(bad, nil, name .. " = -3")
    T.contains(err, "got -3", name .. " = -3")
  end
  -- A fraction or a non-number is a programming error: it raises.
  T.raises("option 'worker_threads' must be a whole number from 1 to 64 (a count)",
           new_with, "worker_threads", 2.5)
  T.raises("option 'max_connections' must be a whole number from 1 to 1024 (a count), not a boolean",
           new_with, "max_connections", true)
  -- A string is text in libs3lect's S3LECT_* syntax (s3lect_config_set_text).
  local el = assert(new_with("max_connections", "16"))
  T.eq(el:get_config().max_connections, 16, "max_connections from the text '16'")
  el:close()
  local bad, err = new_with("max_connections", "16s")
  T.eq(bad, nil, "max_connections = '16s'")
  T.contains(err, "max_connections '16s' is not a count", "max_connections = '16s'")
  -- They are fixed when the elector is made (the shared runtime sizes itself
  -- at start), so update_config refuses them.
  el = assert(s3lect.new({ lock = LOCK, id = "a" }))
  T.raises("option 'callback_threads' cannot change on an existing elector", el.update_config,
           el, { callback_threads = 4 })
  el:close()
end)

T.test("priority is a count and max_hold a duration", function()
  local el = assert(s3lect.new({ lock = LOCK, id = "a", priority = 7, max_hold = 90 }))
  local cfg = el:get_config()
  el:close()
  T.eq(cfg.priority, 7, "get_config().priority")
  T.eq(math.type and math.type(cfg.priority) or "integer", "integer", "priority is an integer")
  T.eq(cfg.max_hold, 90, "get_config().max_hold (seconds)")
  local bad, err = new_with("priority", 1000001)
  T.eq(bad, nil, "priority above its maximum")
  T.contains(err, "priority must be between 0 and 1000000, got 1000001", "priority's range")
  T.raises("option 'priority' must be a whole number from 0 to 1000000 (a count)",
           new_with, "priority", 1.5)
  el = assert(s3lect.new({ lock = LOCK, id = "a",
                           env = { S3LECT_PRIORITY = "5", S3LECT_MAX_HOLD = "1m" } }))
  cfg = el:get_config()
  el:close()
  T.eq(cfg.priority, 5, "S3LECT_PRIORITY")
  T.eq(cfg.max_hold, 60, "S3LECT_MAX_HOLD")
end)
