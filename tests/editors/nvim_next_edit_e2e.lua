-- Drives headless Neovim 0.11 like a user: the synconfroute plugin starts the real server,
-- the user renames `total` to `subtotal` on one line, :SynConfRouteNextEdit shows the
-- server's next edit as virtual text, :SynConfRouteNextEditAccept applies it. What it saw
-- goes to $SYNCONFROUTE_E2E_RESULT (JSON) for tests/test_editors.py to judge.
local env = vim.env
local uv = vim.uv or vim.loop
local out = { messages = {} }

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
sr.setup({ cmd = vim.fn.json_decode(env.SYNCONFROUTE_E2E_CMD) })

local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(out.messages, msg)
  return notify(msg, level, opts)
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

local function wait(what, pred)
  out.step = what
  local deadline = uv.now() + 20000
  local function tick()
    local ok, value = pcall(pred)
    if ok and value then
      return resume(value)
    end
    if not ok or uv.now() > deadline then
      return finish("timed out waiting for " .. what .. (ok and "" or (": " .. tostring(value))))
    end
    vim.defer_fn(tick, 50)
  end
  vim.defer_fn(tick, 0)
  return coroutine.yield()
end

scenario = coroutine.create(function()
  vim.cmd("edit " .. vim.fn.fnameescape(env.SYNCONFROUTE_E2E_FILE))
  local bufnr = vim.api.nvim_get_current_buf()
  wait("the server to attach", function()
    return sr.client(bufnr)
  end)
  -- The user's edit: "total" -> "subtotal" on line 2.
  vim.api.nvim_buf_set_text(bufnr, 1, 4, 1, 4, { "sub" })
  vim.api.nvim_win_set_cursor(0, { 2, 12 })
  vim.cmd("SynConfRouteNextEdit")
  local shown = wait("the next edit to be shown", function()
    return require("synconfroute.next_edit").get(bufnr)
  end)
  out.item_text = shown.item.text
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, -1, 0, -1, { details = true })
  out.virt_lines = {}
  out.struck = nil
  for _, m in ipairs(marks) do
    local d = m[4]
    if d.virt_lines then
      for _, l in ipairs(d.virt_lines) do
        table.insert(out.virt_lines, l[1][1])
      end
    end
    if d.hl_group == "SynConfRouteNextEditOld" then
      out.struck = { m[2], m[3], d.end_row, d.end_col }
    end
  end
  out.lines_while_shown = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  vim.cmd("SynConfRouteNextEditAccept")
  out.lines_after = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  out.marks_after = #vim.api.nvim_buf_get_extmarks(bufnr, -1, 0, -1, {})
  local accepted
  wait("the accept to reach the server", function()
    sr.status(function(st)
      accepted = st.accepted
    end)
    return accepted and accepted > 0
  end)
  out.accepted = accepted
end)

vim.api.nvim_create_autocmd("VimEnter", {
  nested = true,
  callback = function()
    resume()
  end,
})
