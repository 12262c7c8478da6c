-- SPDX-License-Identifier: Apache-2.0
-- run.lua [FILTER] - runs the s3lect Lua test suite under the interpreter
-- that runs this file (lua5.4 or luajit). LUA_CPATH must find the s3lect
-- module built for that interpreter; scripts/test-lua sets it.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local ok, s3lect = pcall(require, "s3lect")
if not ok then
  io.stderr:write("cannot load the s3lect module: ", tostring(s3lect), "\n",
                  "set LUA_CPATH to the directory of the s3lect.so built for this interpreter ",
                  "(e.g. build-lua/lua/5.4/?.so or build-lua/lua/jit/?.so)\n")
  os.exit(1)
end
local vm = jit and jit.version or _VERSION
print(string.format("s3lect %s on %s", s3lect.version(), vm))

local T = require "harness"
dofile(here .. "/test_s3lect.lua")
dofile(here .. "/test_options.lua")
dofile(here .. "/test_config_table.lua")
dofile(here .. "/test_coroutines.lua")
dofile(here .. "/test_stores.lua")
dofile(here .. "/test_fence.lua")
dofile(here .. "/test_testing.lua")
dofile(here .. "/test_transfer.lua")
-- close=true closes the state, so __gc stops any elector a test left behind.
os.exit(T.run(arg[1]), true)
