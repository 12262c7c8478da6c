-- SPDX-License-Identifier: Apache-2.0
-- test_stores.lua - elections on the DynamoDB, PostgreSQL and Route 53
-- stores. The module hands `lock` to libs3lect unchanged; these tests prove
-- that dynamodb://, postgres:// and route53:// locks elect through it.
--
-- The servers come from tests/harness/store_servers.py, which scripts/test's
-- suite_lua wraps around scripts/test-lua; it exports the variables read
-- below (AWS_ENDPOINT_URL_DYNAMODB, S3LECT_TEST_DYNAMODB_ACCESS_KEY_ID,
-- S3LECT_TEST_DYNAMODB_SECRET_ACCESS_KEY, S3LECT_PG_DSN,
-- AWS_ENDPOINT_URL_ROUTE_53, S3LECT_TEST_ROUTE53_ZONE,
-- S3LECT_TEST_ROUTE53_DOMAIN, S3LECT_CLI). Without them the tests skip,
-- saying which variable is missing.

local T = require "harness"
local s3lect = require "s3lect"

local VM = jit and jit.version or _VERSION
local unpack = table.unpack or unpack
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

-- The values of the variables, or skips the test naming the unset ones.
local function need_env(what, ...)
  local vals, missing = {}, {}
  for i, v in ipairs({ ... }) do
    local val = os.getenv(v)
    if not val or val == "" then
      missing[#missing + 1] = v
    end
    vals[i] = val
  end
  if #missing > 0 then
    T.skip(string.format("the %s test server is not configured (%s unset): run the suite as "
                         .. "`python3 tests/harness/store_servers.py --cli build/bin/s3lect -- "
                         .. "scripts/with-minio scripts/test-lua` (scripts/test lua does)",
                         what, table.concat(missing, ", ")))
  end
  return unpack(vals, 1, select("#", ...))
end

local function shq(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Runs `CLI init-store URL` with extra environment assignments; raises
-- with its output if it fails. Returns the output.
local function init_store(cli, url, env)
  local assigns = {}
  for k, v in pairs(env or {}) do
    assigns[#assigns + 1] = k .. "=" .. shq(v)
  end
  local cmd = string.format("%s timeout 90 %s init-store %s 2>&1; echo \"exit=$?\"",
                            table.concat(assigns, " "), shq(cli), shq(url))
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("*a")
  p:close()
  local code = out:match("exit=(%d+)%s*$")
  if code ~= "0" then
    T.fail(string.format("%s init-store %s failed (exit %s): %s", cli, url, tostring(code), out))
  end
  return out
end

-- Each store: (lock URL, extra elector options, staggered start).
local targets = {}

function targets.dynamodb()
  local _, key, secret, cli = need_env("DynamoDB Local", "AWS_ENDPOINT_URL_DYNAMODB",
                                       "S3LECT_TEST_DYNAMODB_ACCESS_KEY_ID",
                                       "S3LECT_TEST_DYNAMODB_SECRET_ACCESS_KEY", "S3LECT_CLI")
  local tbl = unique("s3lect-lua-")
  local lock = "dynamodb://" .. tbl .. "/leader"
  local out = init_store(cli, lock, { AWS_ACCESS_KEY_ID = key, AWS_SECRET_ACCESS_KEY = secret,
                                      AWS_SESSION_TOKEN = "", AWS_REGION = "us-east-1" })
  T.contains(out, tbl, "init-store output")
  -- The endpoint comes from AWS_ENDPOINT_URL_DYNAMODB; the credentials are
  -- given explicitly (scripts/with-minio's AWS_* are MinIO's).
  return lock, { access_key_id = key, secret_access_key = secret, region = "us-east-1" }, false
end

function targets.postgres()
  local dsn, cli = need_env("PostgreSQL", "S3LECT_PG_DSN", "S3LECT_CLI")
  local lock = dsn .. "?key=" .. unique("leader") .. "&table=" .. unique("s3lect_lua_")
  init_store(cli, lock)
  return lock, {}, false
end

function targets.route53()
  local _, zone, domain = need_env("moto (Route 53)", "AWS_ENDPOINT_URL_ROUTE_53",
                                   "S3LECT_TEST_ROUTE53_ZONE", "S3LECT_TEST_ROUTE53_DOMAIN")
  -- moto checks no signatures: any credentials do. It also accepts a CREATE
  -- of a TXT name that already exists (Route 53 refuses it), so two electors
  -- creating the record at once would both win there: b starts once a leads.
  return "route53://" .. zone .. "/" .. unique("lua") .. "." .. domain,
         { access_key_id = "s3lecttest", secret_access_key = "s3lecttest", region = "us-east-1" }, true
end

function targets.gcs()
  local endpoint, bucket = need_env("fake-gcs-server", "S3LECT_TEST_GCS_ENDPOINT",
                                    "S3LECT_TEST_GCS_BUCKET")
  -- fake-gcs-server over http on loopback: no token needed.
  return "gs://" .. bucket .. "/" .. unique("lua"), { endpoint = endpoint }, false
end

function targets.azure()
  -- Azurite: the library reads AZURE_STORAGE_CONNECTION_STRING (account key
  -- and blob endpoint) from the environment.
  local prefix = need_env("Azurite", "S3LECT_TEST_AZURE_LOCK_PREFIX",
                          "AZURE_STORAGE_CONNECTION_STRING")
  return prefix .. unique("lua") .. ".json", {}, false
end

function targets.etcd()
  local endpoint = need_env("etcd", "S3LECT_TEST_ETCD_ENDPOINT")
  return "etcd://" .. endpoint:gsub("^http://", "") .. "/s3lect-test/" .. unique("lua"), {}, false
end

function targets.redis()
  -- redis-server with the store's ACL user; the library reads the password
  -- from S3LECT_REDIS_PASSWORD (exported by store_servers.py too).
  local prefix = need_env("redis-server", "S3LECT_TEST_REDIS_LOCK_PREFIX", "S3LECT_REDIS_PASSWORD")
  return prefix .. unique("lua"), {}, false
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

-- The stores of tests/harness/stores.py that store_servers.py started servers
-- for (S3LECT_TEST_STORES, the registry's order), or without it every target
-- (they skip). A store of the registry without a target fails.
local function tested_stores()
  local v = os.getenv("S3LECT_TEST_STORES")
  if v == nil or v == "" then
    return { "dynamodb", "postgres", "route53", "gcs", "azure", "etcd", "redis" }
  end
  local out = {}
  for kind in v:gmatch("[^,]+") do
    out[#out + 1] = kind
  end
  return out
end

for _, kind in ipairs(tested_stores()) do
  T.test("stores: two electors on a " .. kind .. " lock, one leader, graceful handover", function(t)
    if targets[kind] == nil then
      T.fail("store " .. kind .. " of tests/harness/stores.py (S3LECT_TEST_STORES) has no target "
             .. "in bindings/lua/tests/test_stores.lua")
    end
    local lock, extra, staggered = targets[kind]()
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

T.test("stores: a postgres lock on a missing table reports a clear fatal error", function(t)
  local dsn = need_env("PostgreSQL", "S3LECT_PG_DSN")
  local tbl = unique("nosuch_")
  local o = { lock = dsn .. "?key=leader&table=" .. tbl, id = "a" }
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
