-- SPDX-License-Identifier: Apache-2.0
-- test_transfer.lua - transfer, priority and max_hold (issue 42 items 1, 2,
-- 6): el:transfer(to), el:transfer_commit(), on_transfer and the reason
-- "transferred", on mem:// locks in virtual time (s3lect.clock()). No server.
local s3lect = require "s3lect"
local T = require "harness"

local LEASE = 0.3
local FAST = { lease_timeout = LEASE, renew_interval = 0.1, renew_deadline = 0.2,
               frequent_interval = 0.05, infrequent_interval = 0.15, new_lock_wait = 0 }

local n = 0
local function fresh_lock(t)
  n = n + 1
  local lock = "mem://lua-transfer-" .. n
  s3lect.mem_reset(lock)
  t:defer(function() s3lect.mem_reset(lock) end)
  return lock
end

-- A node records what its callbacks saw. commit: "callback" (on_transfer
-- commits at once), "later" (the test commits), "none" (no on_transfer:
-- this node never hands over).
local function node(t, lock, clock, id, commit, extra)
  local nd = { id = id, lost = {}, transfers = {}, errors = {}, acquired = 0 }
  local opts = { lock = lock, id = id, clock = clock,
    on_acquire = function() nd.acquired = nd.acquired + 1 end,
    on_lose = function(_, reason) nd.lost[#nd.lost + 1] = reason end,
    on_error = function(msg) nd.errors[#nd.errors + 1] = msg end }
  if commit ~= "none" then
    opts.on_transfer = function(target, term)
      nd.transfers[#nd.transfers + 1] = { target, term }
      if commit == "callback" then assert(nd.el:transfer_commit()) end
    end
  end
  for k, v in pairs(FAST) do opts[k] = v end
  for k, v in pairs(extra or {}) do opts[k] = v end
  nd.el = assert(s3lect.new(opts))
  t:defer(function() nd.el:close() end)
  assert(nd.el:start())
  return nd
end

-- Advances in 10 ms steps until cond() (or limit seconds); never two leaders.
local function advance_until(clock, cond, limit, nodes)
  local t0 = clock:now()
  while not cond() and clock:now() - t0 < limit - 1e-9 do
    clock:advance(0.01)
    local leaders = 0
    for _, nd in ipairs(nodes) do
      if nd.el:is_leader() then leaders = leaders + 1 end
    end
    T.ok(leaders <= 1, "two leaders at %.2f", clock:now())
  end
  return clock:now() - t0
end
local function never() return false end

local function two_nodes(t, commit)
  local lock, clock = fresh_lock(t), s3lect.clock()
  local a = node(t, lock, clock, "a", commit)
  clock:advance(0)
  local b = node(t, lock, clock, "b", commit)
  advance_until(clock, never, 4 * LEASE, { a, b })
  T.ok(a.el:is_leader() and not b.el:is_leader(), "a leads, b follows")
  return clock, a, b
end

T.test("transfer: to a named follower", function(t)
  local clock, a, b = two_nodes(t, "callback")
  local term = a.el:term()
  T.eq(a.el:transfer("b"), true, "el:transfer('b')")
  local took = advance_until(clock, function() return b.el:is_leader() end, 5 * LEASE, { a, b })
  T.ok(b.el:is_leader() and took <= LEASE + 0.2, "b leads %.2f s after the request", took)
  T.eq(#a.transfers, 1, "one on_transfer")
  T.eq(a.transfers[1][1], "b", "on_transfer's target")
  T.eq(a.transfers[1][2], term, "on_transfer's term")
  T.eq(a.lost[1], "transferred", "a lost leadership as transferred")
  T.ok(b.el:term() > term, "b's term %d is above a's %d", b.el:term(), term)
  advance_until(clock, never, 20 * LEASE, { a, b })
  T.ok(b.el:is_leader() and not a.el:is_leader(), "b keeps the lock")
end)

T.test("transfer: commit later, and the event table", function(t)
  local lock, clock = fresh_lock(t), s3lect.clock()
  local a = node(t, lock, clock, "a", "later", { events = true })
  clock:advance(0)
  local b = node(t, lock, clock, "b", "later")
  advance_until(clock, never, 4 * LEASE, { a, b })
  local ok, msg, code = a.el:transfer_commit()
  T.eq(ok, nil, "transfer_commit with nothing pending")
  T.contains(msg, "no confirmed transfer", "its message")
  T.eq(code, s3lect.EINVAL, "its code")
  T.eq(a.el:transfer(), true, "el:transfer(): the best live follower")
  advance_until(clock, function() return #a.transfers > 0 end, 5 * LEASE, { a, b })
  clock:advance(0.1)
  T.ok(a.el:is_leader() and not b.el:is_leader() and #a.lost == 0, "not committed yet")
  local seen
  while true do
    local ev = a.el:next_event()
    if not ev then break end
    if ev.type == "transfer" then seen = ev end
  end
  T.ok(seen ~= nil, "a transfer event was queued")
  T.eq(seen.leader_id, "b", "the event names the target")
  T.eq(a.el:transfer_commit(), true, "el:transfer_commit()")
  local took = advance_until(clock, function() return b.el:is_leader() end, 5 * LEASE, { a, b })
  T.ok(b.el:is_leader() and took <= 0.1, "b leads %.2f s after the commit", took)
  T.eq(a.lost[1], "transferred", "a lost leadership as transferred")
end)

T.test("transfer: refusals, and 'nobody' is refused later", function(t)
  local clock, a, b = two_nodes(t, "callback")
  local term = a.el:term()
  local ok, msg, code = b.el:transfer("a")
  T.eq(ok, nil, "a follower cannot transfer")
  T.contains(msg, "does not lead", "its message")
  T.eq(code, s3lect.ENOTLEADER, "its code")
  ok, msg, code = a.el:transfer("a")
  T.eq(ok, nil, "a transfer to itself")
  T.eq(code, s3lect.EINVAL, "its code")
  T.eq(a.el:transfer("nobody"), true, "a transfer to 'nobody' is under way")
  local function refused()
    for _, m in ipairs(a.errors) do
      if m:find("transfer refused", 1, true) then return true end
    end
    return false
  end
  advance_until(clock, refused, 10 * LEASE, { a, b })
  T.ok(refused(), "on_error said the transfer was refused")
  advance_until(clock, never, 10 * LEASE, { a, b })
  T.ok(a.el:is_leader() and a.el:term() == term and #a.lost == 0 and b.acquired == 0,
       "a keeps leading with its term")
end)

-- Without on_transfer nothing would stop a's leader work before b starts
-- its own: the transfer is abandoned after its commit window (2 x
-- max(lease, leader_hold)), on_error says so, and a keeps leading.
T.test("transfer: without on_transfer the leader never hands over", function(t)
  local lock, clock = fresh_lock(t), s3lect.clock()
  local a = node(t, lock, clock, "a", "none", { events = true })
  clock:advance(0)
  local b = node(t, lock, clock, "b", "none")
  advance_until(clock, never, 4 * LEASE, { a, b })
  T.ok(a.el:is_leader() and not b.el:is_leader(), "a leads, b follows")
  local cfg = a.el:get_config()
  local window = 2 * math.max(cfg.lease_timeout, cfg.leader_hold)
  local term = a.el:term()
  T.eq(a.el:transfer("b"), true, "el:transfer('b')")
  local seen
  advance_until(clock, function()
    while not seen do
      local ev = a.el:next_event()
      if not ev then break end
      if ev.type == "transfer" then seen = ev end
    end
    return seen ~= nil
  end, 5 * LEASE, { a, b })
  T.ok(seen ~= nil and seen.leader_id == "b", "b confirmed (the transfer event names b)")
  local function abandoned()
    for _, m in ipairs(a.errors) do
      if m:find("did not stop its leader work", 1, true) then return true end
    end
    return false
  end
  -- Through the commit window and past it: a leads at every step.
  local t0, steady = clock:now(), true
  while not abandoned() and clock:now() - t0 < window + 2 * LEASE do
    clock:advance(0.01)
    if not a.el:is_leader() or b.el:is_leader() then steady = false break end
  end
  local took = clock:now() - t0
  T.ok(steady, "a leads and b follows %.2f s after the confirmation", took)
  T.ok(abandoned(), "on_error said the transfer was abandoned")
  T.ok(took >= window - 0.01 - 1e-9 and took <= window + 0.2,
       "abandoned %.2f s after the confirmation, window %.2f s", took, window)
  advance_until(clock, never, 10 * LEASE, { a, b })
  T.ok(a.el:is_leader() and a.el:term() == term and #a.lost == 0, "a keeps leading with its term")
  T.ok(not b.el:is_leader() and b.acquired == 0, "b never led")
end)

T.test("transfer: priority gets the lock", function(t)
  local lock, clock = fresh_lock(t), s3lect.clock()
  local a = node(t, lock, clock, "a", "callback")
  advance_until(clock, never, 4 * LEASE, { a })
  local b = node(t, lock, clock, "b", "callback", { priority = 10 })
  local took = advance_until(clock, function() return b.el:is_leader() end, 10 * LEASE, { a, b })
  T.ok(b.el:is_leader() and took >= LEASE - 1e-9 and took <= 3 * LEASE,
       "b (priority 10) leads %.2f s after it started", took)
  T.eq(a.lost[1], "transferred", "a handed over")
  T.eq(a.transfers[1] and a.transfers[1][1], "b", "a's on_transfer named b")
  advance_until(clock, never, 30 * LEASE, { a, b })
  T.ok(b.el:is_leader() and #a.lost == 1, "b keeps the lock")
end)

T.test("transfer: max_hold rotates leadership", function(t)
  local lock, clock = fresh_lock(t), s3lect.clock()
  local a = node(t, lock, clock, "a", "callback", { max_hold = 1 })
  clock:advance(0)
  local b = node(t, lock, clock, "b", "callback", { max_hold = 1 })
  advance_until(clock, never, 10, { a, b })
  local handed = 0
  for _, nd in ipairs({ a, b }) do
    for _, r in ipairs(nd.lost) do
      if r == "transferred" then handed = handed + 1 end
    end
  end
  T.ok(handed >= 5 and handed <= 11, "%d transfers in 10 s of 1 s tenure", handed)
end)
