-- SPDX-License-Identifier: Apache-2.0
-- test_fence.lua - fenced writes (docs/fencing.md) on the file store: a
-- leader's writes, a deposed leader's refused (tests/c/test_fence.c's
-- scenario through the Lua API). No server needed.
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

local function new_elector(t, lock, id)
  local el = assert(s3lect.new({
    lock = lock, id = id, lease_timeout = 3, renew_interval = 0.5, renew_deadline = 2,
    frequent_interval = 0.5, infrequent_interval = 1, new_lock_wait = 0,
  }))
  t:defer(function()
    el:close()
  end)
  return el
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then
    f:close()
  end
  return f ~= nil
end

T.test("fence: a leader's writes, a deposed leader's fenced", function(t)
  local dir = tempdir(t)
  local lock = "file://" .. dir .. "/lock.json"
  local obj, other = "file://" .. dir .. "/state.json", "file://" .. dir .. "/other.json"
  local a = new_elector(t, lock, "node-a")
  local fa = assert(a:fence())
  t:defer(function()
    fa:close()
  end)

  local ok, err, code = fa:put(obj, "x")
  T.eq(ok, nil, "a put before leading")
  T.eq(code, s3lect.ENOTLEADER, "its code")
  T.contains(err, "f:put()", "its message")
  T.ok(not exists(dir .. "/state.json"), "refused before anything was sent")
  local body, version, term
  body, err, code, version, term = fa:get(obj)
  T.eq(body, nil, "nothing there yet")
  T.eq(code, s3lect.ENOTFOUND, "not found")
  T.eq(version, nil, "no tombstone's version")
  T.eq(term, 0, "no tombstone's term")
  T.eq(a:fence_token(), nil, "no token while not leading")

  assert(a:start())
  T.drive({ a }, function()
    return a:is_leader()
  end, 15, "a to lead")
  local ta = a:term()
  local tok_a = a:fence_token()
  T.ok(type(tok_a) == "string" and tok_a:find("s3lect-fence.1." .. ta .. ".", 1, true) == 1,
       "a's token: %s", tostring(tok_a))

  local data = "v1\0\255\n" -- binary-safe
  assert(fa:put(obj, data))
  body, version, term = fa:get(obj)
  T.eq(body, data, "a reads its bytes back")
  T.eq(term, ta, "in its term")
  T.ok(type(version) == "string" and #version > 0, "with a version")
  assert(fa:cas(obj, "v2", version))
  ok, err, code = fa:cas(obj, "v3", version)
  T.eq(code, s3lect.EPRECONDITION, "a stale version: " .. tostring(err))
  T.eq((fa:get(obj)), "v2", "the stale cas wrote nothing")
  assert(fa:cas(other, "new", nil))
  ok, err, code = fa:cas(other, "new")
  T.eq(code, s3lect.EPRECONDITION, "create-only where there is one")

  -- The zombie: a process that still holds a's token after b took over.
  local fz = assert(s3lect.fence_from_token(tok_a, { request_timeout = 5 }))
  t:defer(function()
    fz:close()
  end)
  local _, zv = assert(fz:get(obj))
  assert(a:stop({ release = false })) -- as a frozen host
  local b = new_elector(t, lock, "node-b")
  assert(b:start())
  T.drive({ b }, function()
    return b:is_leader()
  end, 15, "b to lead")
  T.ok(b:term() > ta, "b leads in a newer term (%d, a's %d)", b:term(), ta)
  local fb = assert(b:fence())
  assert(fb:put(obj, "v2")) -- the very bytes a wrote last
  ok, err, code = fz:cas(obj, "zombie", zv)
  T.eq(code, s3lect.EFENCED, "the zombie's cas")
  T.contains(err, "newer than ours", "it says why")
  ok, err, code = fz:put(obj, "zombie")
  T.eq(code, s3lect.EFENCED, "the zombie's put")
  body, _, term = fb:get(obj)
  T.eq(body, "v2", "b's bytes are there")
  T.eq(term, b:term(), "in b's term")

  -- A delete, then the zombie's re-create.
  assert(fb:delete(other))
  body, err, code, version, term = fb:get(other)
  T.eq(code, s3lect.ENOTFOUND, "deleted: not found")
  T.ok(type(version) == "string" and #version > 0, "the tombstone's version")
  T.eq(term, b:term(), "the tombstone's term")
  ok, err, code = fz:cas(other, "again", nil)
  T.eq(code, s3lect.EFENCED, "the zombie's create-only over the tombstone")
  ok, err, code = fz:put(other, "again")
  T.eq(code, s3lect.EFENCED, "the zombie's re-create")
  assert(fb:cas(other, "back", version))
  T.eq((fb:get(other)), "back", "b created it again")

  ok, err, code = fa:put(obj, "late")
  T.eq(code, s3lect.ENOTLEADER, "a's own fence after it stopped")

  -- Closing the elector closes its fences first.
  b:close()
  T.raises("fence is closed", fb.put, fb, obj, "after")
  fb:close()
end)

T.test("fence: tokens, options and close", function(t)
  local f, err, code = s3lect.fence_from_token("not a token")
  T.eq(f, nil, "garbage is no token")
  T.eq(code, s3lect.EINVAL, "its code")
  T.contains(err, "not a fence token", "its message")
  T.raises("unknown option", s3lect.fence_from_token, "s3lect-fence.1.3.YQ.cw", { nope = 1 })
  T.raises("unknown option", s3lect.fence_from_token, "s3lect-fence.1.3.YQ.cw",
           { on_acquire = function() end })
  f = assert(s3lect.fence_from_token("s3lect-fence.1.3.YQ.cw",
                                     { endpoint = "http://127.0.0.1:1", region = "us-east-1" }))
  local url = "file://" .. tempdir(t) .. "/x.json"
  assert(f:put(url, ""))
  local body, version, term = f:get(url)
  T.eq(body, "", "empty bytes")
  T.eq(term, 3, "the token's term")
  T.ok(version ~= nil, "a version")
  T.contains(tostring(f), "s3lect.fence", "tostring")
  f:close()
  f:close()
  T.raises("fence is closed", f.get, f, url)
  T.contains(tostring(f), "closed", "tostring of a closed fence")
  T.ok(s3lect.EFENCED < 0 and s3lect.ENOTLEADER < 0 and s3lect.ERETRIES < 0, "the new codes")
end)

T.test("fence: a fence and its elector dropped together are collected", function(t)
  local dir = tempdir(t)
  local weak = setmetatable({}, { __mode = "v" })
  do
    local el = new_elector(t, "file://" .. dir .. "/lock.json", "gc")
    weak.fence = assert(el:fence())
    weak.el = el
    t.cleanups[#t.cleanups] = nil -- the elector is left to the collector
  end
  collectgarbage()
  collectgarbage()
  T.eq(weak.fence, nil, "the fence was collected")
  collectgarbage()
  collectgarbage()
  T.eq(weak.el, nil, "then the elector")
end)
