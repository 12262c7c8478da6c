-- SPDX-License-Identifier: Apache-2.0
-- child_callback_error.lua MODE LOCKPATH - run by test_s3lect.lua in a child
-- interpreter so that its stderr can be captured. An elector on a file lock
-- whose on_acquire raises; MODE "no_on_error" has no on_error callback,
-- "failing_on_error" has one that raises too. Prints CHILD-DONE when the veto
-- has been seen, within a bounded time.
local s3lect = require "s3lect"
local mode, lock = arg[1], arg[2]
local lost = false
local opts = {
  lock = lock, id = "child", lease_timeout = 3, renew_interval = 0.5, renew_deadline = 2,
  frequent_interval = 0.5, infrequent_interval = 1,
  on_acquire = function()
    error("child-boom")
  end,
  on_lose = function()
    lost = true
  end,
}
if mode == "failing_on_error" then
  opts.on_error = function()
    error("on-error-boom")
  end
end
local el = assert(s3lect.new(opts))
assert(el:start())
local deadline = os.time() + 20
while not lost and os.time() <= deadline do
  s3lect.poll_fd(el:fd(), 100)
  assert(el:dispatch(0))
end
el:close()
io.stderr:flush()
print(lost and "CHILD-DONE" or "CHILD-TIMEOUT")
