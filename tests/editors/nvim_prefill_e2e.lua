-- Drives headless Neovim: the synconfroute plugin reports where the cursor rests
-- (synconfroute/cursor), the real server prefills the embedded model's prompt there, and
-- the completion asked there (<C-x><C-u>) finds it in the KV cache. The same with the
-- reports turned off (cursor_ms = 0), in another file, is the control. What it saw goes to
-- $SYNCONFROUTE_E2E_RESULT (JSON); tests/test_editors.py judges it.
local env = vim.env
local uv = vim.uv or vim.loop
local out = { version = ("%d.%d"):format(vim.version().major, vim.version().minor), messages = {} }

local function finish(err)
  out.error = err
  local f = assert(io.open(env.SYNCONFROUTE_E2E_RESULT, "w"))
  f:write(vim.fn.json_encode(out))
  f:close()
  vim.cmd("qa!")
end

vim.defer_fn(function()
  finish("gave up after 240 s (last step: " .. tostring(out.step) .. ")")
end, 240000)

vim.opt.rtp:prepend(env.SYNCONFROUTE_E2E_ROOT .. "/editors/neovim")
vim.opt.completeopt = { "menuone", "noinsert" }
local sr = require("synconfroute")
sr.setup({ cmd = vim.fn.json_decode(env.SYNCONFROUTE_E2E_CMD), inline = false })

local function keys(s)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(s, true, false, true), "mt", false)
end

local scenario
local function resume(...)
  local ok, err = coroutine.resume(scenario, ...)
  if not ok then
    finish(tostring(err))
  elseif coroutine.status(scenario) == "dead" then
    finish(nil)
  end
end

local started = uv.hrtime()
out.times = {}
local function wait(what, pred)
  out.step = what
  table.insert(out.times, ("%.2f %s"):format((uv.hrtime() - started) / 1e9, what))
  local deadline = uv.now() + 90000 -- SmolLM2 on busy cores
  local function tick()
    local ok, value = pcall(pred)
    if ok and value then
      return resume(value)
    end
    if not ok or uv.now() > deadline then
      return resume(nil, ok and "timed out" or tostring(value))
    end
    vim.defer_fn(tick, 50)
  end
  vim.defer_fn(tick, 0)
  local value, err = coroutine.yield()
  if err then
    error(what .. ": " .. err, 0)
  end
  return value
end


local function sleep(ms)
  local t0 = uv.now()
  wait("a rest of " .. ms .. " ms", function()
    return uv.now() - t0 >= ms
  end)
end

local function worker()
  local st
  sr.status(function(s)
    st = s
  end)
  st = wait("synconfroute.status", function()
    return st
  end)
  -- No worker yet (the tier starts it at the first request or warm-up; on a busy
  -- machine that takes a while): nil, and the caller waits.
  if type(st.local_worker) ~= "table" then
    return nil
  end
  return st.local_worker
end

local function until_worker(what, pred)
  local deadline = uv.now() + 90000
  while true do
    out.step = what
    local w = worker()
    if w ~= nil and pred(w) then
      return w
    end
    assert(uv.now() < deadline, what .. ": timed out " .. vim.inspect(w or "no embedded worker"))
    sleep(250)
  end
end

-- Open `file`, put the cursor at the end of `line` in Insert mode (as a user who clicks
-- there and starts), rest `rest_ms` or until a prefill ran, then ask: the share of the
-- completion's prompt tokens that came from the KV cache.
local function ask_after_open(file, line, rest_ms)
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  wait("the server to attach", function()
    return vim.bo[buf].completefunc ~= "" and sr.client(buf)
  end)
  local w0 = until_worker("the worker", function(w)
    return w.pid ~= nil
  end)
  vim.api.nvim_win_set_cursor(0, { line, 0 })
  keys("A")
  local before
  if rest_ms then
    sleep(rest_ms)
    before = until_worker("the worker after the rest", function()
      return true
    end)
  else
    before = until_worker("a prefill at the resting cursor", function(w)
      return w.prefills > w0.prefills
    end)
  end
  keys("<C-x><C-u>")
  local after = until_worker("the completion's prompt", function(w)
    return w.prompt_tokens > before.prompt_tokens
  end)
  keys("<C-e><Esc>")
  local share = (after.cached_tokens - before.cached_tokens)
    / math.max(1, after.prompt_tokens - before.prompt_tokens)
  return { share = share, prefills = before.prefills - w0.prefills }
end

scenario = coroutine.create(function()
  -- Control: the plugin does not report the cursor.
  sr.config.cursor_ms = 0
  out.off = ask_after_open(env.SYNCONFROUTE_E2E_COLD, 61, 3000)
  -- The plugin reports where the cursor rests.
  sr.config.cursor_ms = 150
  out.on = ask_after_open(env.SYNCONFROUTE_E2E_FILE, 61, nil)
end)

-- Start once Neovim has finished starting up (filetype detection is on by then); nested,
-- so that :edit inside it fires FileType.
vim.api.nvim_create_autocmd("VimEnter", {
  once = true,
  nested = true,
  callback = function()
    resume()
  end,
})
