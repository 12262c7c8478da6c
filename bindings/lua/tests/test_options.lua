-- test_options.lua - the module's options are libs3lect's (s3lect.options(),
-- from s3lect_option_info), and it covers every option the library reports.
-- Loaded by run.lua after test_s3lect.lua. No store is contacted: s3lect.new
-- only builds and validates a configuration.

local T = require "harness"
local s3lect = require "s3lect"

-- Library options s3lect.new deliberately does not take (see hidden_options
-- in src/s3lect_lua.c): poll mode is always on in this binding.
local HIDDEN = { poll_mode = true }
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
      if o.type == "int" then
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
        -- Integer options are seconds in Lua (ms in C).
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
    if o.type == "int" and not HIDDEN[o.name] then
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
