-- SPDX-License-Identifier: Apache-2.0
-- test_config_table.lua - tests/data/config_table.txt through s3lect.new:
-- each case's values as strings, which libs3lect parses with the one S3LECT_*
-- syntax (s3lect_config_set_text); el:get_config() must show the table's
-- effective values (seconds here, ms in the table) or s3lect.new the error
-- text. C, the CLI, Python and Go run the same table. No store is contacted.

local T = require "harness"
local s3lect = require "s3lect"

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local TABLE = here .. "/../../../tests/data/config_table.txt"
local ENV_TABLE = here .. "/../../../tests/data/env_table.txt"
local LOCK = "file://" .. (os.getenv("TMPDIR") or "/tmp") .. "/s3lect-lua-config-table-lock"

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- The cases of a table of tests/data (config_table.txt, env_table.txt): each
-- {id, given = {NAME = TEXT}, want = {NAME = VALUE text}, error = TEXT}.
local function cases(path)
  local out = {}
  for line in io.lines(path) do
    if line ~= "" and line:sub(1, 1) ~= "#" then
      local id, given, result = line:match("^(.-) | (.-) | (.*)$")
      local c = { id = id, given = {}, want = {} }
      for item in given:gmatch("[^;]+") do
        local k, v = trim(item):match("^([%w_]+)=(.*)$")
        if k then
          c.given[k] = v
        end
      end
      if result:sub(1, 6) == "error " then
        c.error = result:sub(7)
      else
        for k, v in result:sub(6):gmatch("([%w_]+)=(%S*)") do
          c.want[k] = v
        end
      end
      out[#out + 1] = c
    end
  end
  return out
end

-- Runs one case with s3lect.new(opts): the error text, or the effective
-- values of el:get_config() (durations in ms, booleans 0/1, as the tables
-- write them).
local function check_case(c, opts, units)
  local el, err = s3lect.new(opts)
  if c.error then
    T.ok(el == nil, "%s: want an error, got an elector", c.id)
    T.ok(err and err:find(c.error, 1, true), "%s: want '%s' in '%s'", c.id, c.error, tostring(err))
    if el then
      el:close()
    end
    return
  end
  T.ok(el ~= nil, "%s: %s", c.id, tostring(err))
  if not el then
    return
  end
  local cfg = el:get_config()
  el:close()
  for k, want in pairs(c.want) do
    local got = cfg[k]
    if units[k] == "ms" then
      got = math.floor(got * 1000 + 0.5)
    elseif type(got) == "boolean" then
      got = got and 1 or 0
    end
    T.eq(tostring(got), want, c.id .. ": " .. k)
  end
end

local function option_units()
  local units = {}
  for _, o in ipairs(s3lect.options()) do
    units[o.name] = o.unit
  end
  return units
end

T.test("the configuration table gives libs3lect's values and errors", function()
  local units, all = option_units(), cases(TABLE)
  T.ok(#all >= 30, "the table has %d cases, want at least 30", #all)
  for _, c in ipairs(all) do
    local opts = { lock = LOCK, id = "a" }
    for k, v in pairs(c.given) do
      opts[k] = v
    end
    check_case(c, opts, units)
  end
end)

T.test("lease_timeout alone is enough (libs3lect derives the renew timings)", function()
  local el = assert(s3lect.new({ lock = LOCK, id = "a", lease_timeout = 3 }))
  local cfg = el:get_config()
  el:close()
  T.eq(cfg.renew_deadline, 2, "renew_deadline")
  T.eq(cfg.renew_interval, 1, "renew_interval")
end)


T.test("the environment table through env = {...}: libs3lect's one map", function()
  local units, all = option_units(), cases(ENV_TABLE)
  T.ok(#all >= 20, "the environment table has %d cases, want at least 20", #all)
  for _, c in ipairs(all) do
    local opts = { env = c.given }
    if not c.given.S3LECT_LOCK then
      opts.lock = LOCK
    else -- another store opens with credentials: throwaway ones, and no lookup
      opts.access_key_id, opts.secret_access_key = "AKIDTHROWAWAY", "throwaway"
    end
    if not (c.given.S3LECT_SERVER_ID or c.given.S3LECT_ID) then
      opts.id = "a"
    end
    check_case(c, opts, units)
  end
end)

T.test("env = true reads the process's variables; the options given win", function()
  -- scripts/test-lua's environment has no S3LECT_LEASE_TIMEOUT (nor
  -- S3LECT_ID): env = true leaves the default and the id given.
  T.ok(os.getenv("S3LECT_LEASE_TIMEOUT") == nil, "the runner's environment sets S3LECT_LEASE_TIMEOUT")
  local el = assert(s3lect.new({ lock = LOCK, id = "a", env = true }))
  local cfg = el:get_config()
  el:close()
  T.eq(cfg.lease_timeout, 15, "lease_timeout")
  T.eq(cfg.server_id, "a", "server_id")
  el = assert(s3lect.new({ lock = LOCK, id = "a", env = { S3LECT_LEASE_TIMEOUT = "3s" },
                           lease_timeout = 6 }))
  cfg = el:get_config()
  el:close()
  T.eq(cfg.lease_timeout, 6, "the option wins over its variable")
  local ok, err = pcall(s3lect.new, { lock = LOCK, id = "a", env = "yes" })
  T.ok(not ok and tostring(err):find("option 'env' must be true or a table", 1, true),
       "env = 'yes': %s", tostring(err))
  ok, err = pcall(s3lect.new, { lock = LOCK, id = "a", env = { S3LECT_LEASE_TIMEOUT = 3 } })
  T.ok(not ok and tostring(err):find("must map variable names to strings", 1, true),
       "a number value: %s", tostring(err))
end)
