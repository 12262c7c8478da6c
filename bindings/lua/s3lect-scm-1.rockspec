-- SPDX-License-Identifier: Apache-2.0
-- luarocks rockspec for the s3lect Lua module.
--
-- From a checkout (builds the C core and the module for the Lua that
-- luarocks targets, and installs s3lect.so into the rocks tree):
--     luarocks make bindings/lua/s3lect-scm-1.rockspec          (run at the repository root)
--     luarocks --lua-version 5.1 make bindings/lua/s3lect-scm-1.rockspec \
--         LUA_INCDIR=/usr/include/luajit-2.1                                (LuaJIT on Debian)
-- Needs a C compiler, CMake >= 3.18, pkg-config and the development files of
-- libcurl, cJSON and OpenSSL (Debian: libcurl4-openssl-dev libcjson-dev libssl-dev).
rockspec_format = "3.0"
package = "s3lect"
version = "scm-1"

-- Placeholder: `luarocks make` ignores it. A released version's rockspec
-- (scripts/lua-rockspec, run by .github/workflows/release.yml) names the
-- source archive of its tag instead, with its MD5.
source = {
  url = "git+https://github.com/s3lect/s3lect.git",
}

description = {
  summary = "Leader election for processes that share nothing but an S3 bucket",
  detailed = [[
s3lect elects one leader among processes that share an S3 bucket (or a local
directory), using conditional writes on one lock object. This module binds the
s3lect C library in poll mode: callbacks run on the host's own thread when it
calls el:dispatch(), and el:fd() plugs into any event loop.]],
  labels = { "leader-election", "s3", "distributed" },
  license = "Apache-2.0",
}

dependencies = {
  "lua >= 5.1, < 5.5",
}

build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    S3LECT_BUILD_LUA = "ON",
    S3LECT_BUILD_TESTS = "OFF",
    S3LECT_BUILD_CLI = "OFF",
    S3LECT_BUILD_SHARED = "OFF",
    S3LECT_LUA_INCDIR = "$(LUA_INCDIR)",
    S3LECT_LUA_LIBDIR = "$(LIBDIR)",
  },
}
