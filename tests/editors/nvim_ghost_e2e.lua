-- Drives headless Neovim 0.8-0.11 like a user: the synconfroute plugin from editors/neovim
-- starts the real server, typing shows the completion as ghost text (virtual text), Alt-Right
-- takes its next word, Alt-Ctrl-Right its next line, Ctrl-] dismisses it, Tab takes it all,
-- K shows the route card. What it saw goes to $SYNCONFROUTE_E2E_RESULT (JSON) for
-- tests/test_editors.py to judge.
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
  finish("gave up after 60 s (last step: " .. tostring(out.step) .. ")")
end, 60000)

vim.opt.rtp:prepend(env.SYNCONFROUTE_E2E_ROOT .. "/editors/neovim")
local sr = require("synconfroute")
sr.setup({
  cmd = vim.fn.json_decode(env.SYNCONFROUTE_E2E_CMD),
  settings = { routing = { threshold = -0.7 } },
})

local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(out.messages, msg)
  return notify(msg, level, opts)
end

local function keys(s, mode)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(s, true, false, true), mode or "mt", false)
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
  local deadline = uv.now() + 20000
  local function tick()
    local ok, value = pcall(pred)
    if ok and value then
      return resume(value)
    end
    if not ok or uv.now() > deadline then
      return resume(nil, ok and "timed out" or tostring(value))
    end
    vim.defer_fn(tick, 20)
  end
  vim.defer_fn(tick, 0)
  local value, err = coroutine.yield()
  if err then
    error(what .. ": " .. err, 0)
  end
  return value
end

local function float_lines()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= "" then
      return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false)
    end
  end
end

local function close_floats()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= "" then
      vim.api.nvim_win_close(win, true)
    end
  end
end

-- The ghost text as Neovim will draw it: our extmarks' virtual text and lines.
local ghost_ns = require("synconfroute.ghost").ns
local function virtual(buf)
  local marks = vim.api.nvim_buf_get_extmarks(buf, ghost_ns, 0, -1, { details = true })
  if #marks == 0 then
    return nil
  end
  local m = marks[1]
  local d = m[4]
  local v = { row = m[2], col = m[3], pos = d.virt_text_pos, text = {}, lines = {} }
  for _, chunk in ipairs(d.virt_text or {}) do
    table.insert(v.text, chunk[1])
    v.hl = chunk[2]
  end
  for _, line in ipairs(d.virt_lines or {}) do
    table.insert(v.lines, line[1] and line[1][1] or "")
  end
  v.text = table.concat(v.text)
  return v
end

local function lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function status()
  local st
  sr.status(function(s) st = s end)
  return wait("synconfroute.status", function() return st end)
end

scenario = coroutine.create(function()
  vim.cmd("edit " .. vim.fn.fnameescape(env.SYNCONFROUTE_E2E_FILE))
  local buf = vim.api.nvim_get_current_buf()
  local client = wait("the server to attach", function() return sr.client(buf) end)
  out.mode = sr.mode()
  out.completefunc = vim.bo[buf].completefunc
  out.server_name = client.name

  -- A new line in the function (Enter after line 1): the completion shows as virtual text.
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  keys("A<CR>")
  out.ghost = wait("the ghost text", function() return virtual(buf) end)
  out.shown = sr.ghost().text
  out.lines_while_shown = lines(buf) -- virtual: not in the buffer

  keys("<M-Right>") -- the next word
  wait("a word taken", function() return vim.fn.getline(2) ~= "    " end)
  out.after_word = { line = vim.fn.getline(2), ghost = sr.ghost() and sr.ghost().text }
  keys("<M-C-Right>") -- the rest of the line
  wait("a line taken", function() return vim.fn.getline(2) ~= out.after_word.line end)
  out.after_line = { line = vim.fn.getline(2), ghost = sr.ghost() and sr.ghost().text }
  keys("<M-C-Right>") -- the next line, the last of it
  wait("the next line taken", function() return #lines(buf) > #out.lines_while_shown end)
  out.after_next_line = { lines = lines(buf), ghost = sr.ghost() and sr.ghost().text }
  out.ghost_after_all = virtual(buf)
  out.route_after_partial = sr.route and sr.route.route
  keys("<Esc>")
  wait("normal mode", function() return vim.fn.mode() == "n" end)

  -- K on line 2: the route card of the completion taken there.
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  keys("K")
  out.hover = wait("the hover window", float_lines)
  close_floats()

  -- The empty body of sub(): asked for by key, left by <Esc>, then by <C-]>; Tab takes it.
  local last = #lines(buf)
  out.last_line = vim.fn.getline(last)
  vim.api.nvim_win_set_cursor(0, { last, 0 })
  keys("A<M-\\>")
  wait("the ghost text on request", function() return virtual(buf) end)
  keys("<Esc>")
  wait("the ghost text gone on leaving insert mode", function()
    return vim.fn.mode() == "n" and virtual(buf) == nil and sr.ghost() == nil
  end)
  out.line_after_escape = vim.fn.getline(last)
  keys("A<M-\\>")
  wait("the ghost text again", function() return virtual(buf) end)
  keys("<C-]>")
  wait("the ghost text dismissed", function() return virtual(buf) == nil and sr.ghost() == nil end)
  out.mode_after_dismiss = vim.fn.mode()
  out.line_after_dismiss = vim.fn.getline(last)
  sr.trigger()
  wait("the ghost text a third time", function() return virtual(buf) end)
  keys("<Tab>")
  wait("all of it taken", function() return #lines(buf) > last end)
  out.lines_after_tab = lines(buf)
  out.ghost_after_tab = virtual(buf)
  local before = vim.fn.getline(".")
  keys("<Tab><Esc>") -- without ghost text, Tab is a Tab
  wait("a plain Tab", function() return vim.fn.mode() == "n" and vim.fn.getline(".") ~= before end)
  out.plain_tab = { before = before, after = vim.fn.getline(".") }

  local st = status()
  for _ = 1, 100 do
    if st.accepted and st.accepted >= 2 then
      break
    end
    st = status()
  end
  out.status = st
  out.statusline = sr.statusline()
  out.last_route = sr.last_route
end)

vim.api.nvim_create_autocmd("VimEnter", {
  once = true,
  nested = true,
  callback = function()
    resume()
  end,
})
