-- Drives headless Neovim like a user: the synconfroute plugin from editors/neovim starts the
-- real server, <C-x><C-u> asks for a completion, K shows the route card, <C-y> takes the
-- completion, :SynConfRouteStatus / :SynConfRouteToggleLocalOnly talk to the server.
-- What it saw goes to $SYNCONFROUTE_E2E_RESULT (JSON); tests/test_editors.py judges it.
local env = vim.env
local out = { version = ("%d.%d"):format(vim.version().major, vim.version().minor), messages = {} }

local function finish(err)
  out.error = err
  local f = assert(io.open(env.SYNCONFROUTE_E2E_RESULT, "w"))
  f:write(vim.fn.json_encode(out))
  f:close()
  vim.cmd("qa!")
end

-- Whatever happens, leave (the test also bounds this process with a timeout).
vim.defer_fn(function()
  finish("gave up after 60 s (last step: " .. tostring(out.step) .. ")")
end, 60000)

vim.opt.rtp:prepend(env.SYNCONFROUTE_E2E_ROOT .. "/editors/neovim")
vim.opt.completeopt = { "menuone", "noinsert" } -- show the menu; <C-y> inserts
local sr = require("synconfroute")
sr.setup({
  cmd = vim.fn.json_decode(env.SYNCONFROUTE_E2E_CMD),
  settings = { routing = { threshold = -0.7 } },
  -- 0.7 gets classic completion by default; a newer Neovim is told to use it.
  inline = vim.fn.has("nvim-0.8") == 0,
})

-- What the plugin tells the user goes into the result as well.
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(out.messages, msg)
  return notify(msg, level, opts)
end

local function keys(s, mode)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(s, true, false, true), mode or "n", false)
end

-- The scenario runs in a coroutine; `wait` yields to the main loop (which processes the
-- typed keys and the server's replies) until `pred` returns a value.
local scenario
local function resume(...)
  local ok, err = coroutine.resume(scenario, ...)
  if not ok then
    finish(tostring(err))
  elseif coroutine.status(scenario) == "dead" then
    finish(nil)
  end
end

local started = vim.loop.hrtime()
out.times = {}
local function wait(what, pred)
  out.step = what
  table.insert(out.times, ("%.2f %s"):format((vim.loop.hrtime() - started) / 1e9, what))
  local deadline = vim.loop.now() + 20000
  local function tick()
    local ok, value = pcall(pred)
    if ok and value then
      return resume(value)
    end
    if not ok or vim.loop.now() > deadline then
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

local function menu_items()
  local items = vim.fn.complete_info({ "items" }).items
  if items and #items > 0 then
    return items
  end
end

local function status()
  local st
  sr.status(function(s) st = s end)
  return wait("synconfroute.status", function() return st end)
end

scenario = coroutine.create(function()
  vim.cmd("edit " .. vim.fn.fnameescape(env.SYNCONFROUTE_E2E_FILE))
  local buf = vim.api.nvim_get_current_buf()
  local client = wait("the server to attach", function()
    return vim.bo[buf].completefunc ~= "" and sr.client(buf)
  end)
  out.attached = true
  out.completefunc = vim.bo[buf].completefunc
  out.filetype = vim.bo[buf].filetype
  out.server_name = client.name

  -- Look first: ask at the end of line 2 ("    return "), read the menu, close it.
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  keys("A<C-x><C-u>")
  out.candidates = {}
  for _, it in ipairs(wait("the completion menu", menu_items)) do
    table.insert(out.candidates, { word = it.word, abbr = it.abbr, menu = it.menu, info = it.info })
  end
  keys("<C-e><Esc>")
  wait("normal mode", function() return vim.fn.mode() == "n" end)
  keys("K", "m") -- the plugin's buffer mapping
  out.hover = wait("the hover window", float_lines)
  close_floats()

  -- Take it: ask again, <C-y>.
  keys("A<C-x><C-u>")
  wait("the completion menu again", menu_items)
  keys("<C-y>")
  out.last_route = wait("CompleteDone", function() return sr.last_route end)
  keys("<Esc>")
  wait("the text in the buffer", function()
    return vim.fn.mode() == "n" and vim.fn.getline(2) ~= "    return "
  end)
  out.line = vim.fn.getline(2)
  keys("K", "m") -- on the completed line: the card stays
  out.hover_after = wait("the hover window after taking it", float_lines)
  close_floats()

  -- The accept command reaches the server (it is sent after the edit).
  local st = status()
  for _ = 1, 100 do
    if st.accepted and st.accepted >= 1 then
      break
    end
    st = status()
  end
  out.status = st

  vim.cmd("SynConfRouteToggleLocalOnly")
  local after = status()
  for _ = 1, 100 do
    if after.local_only then
      break
    end
    after = status()
  end
  out.local_only_after_toggle = after.local_only
  out.commands = {
    status = vim.fn.exists(":SynConfRouteStatus"),
    toggle = vim.fn.exists(":SynConfRouteToggleLocalOnly"),
  }
  vim.cmd("SynConfRouteStatus")
  vim.cmd("checkhealth synconfroute")
  out.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
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
