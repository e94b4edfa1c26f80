-- Ghost text for Neovim 0.8-0.11 (no vim.lsp.inline_completion): asks the server for
-- textDocument/inlineCompletion as you type, shows the first candidate as virtual text at
-- the cursor, and takes all of it, its next word or its next line. Used on 0.12+ as well
-- when setup{ inline = "plugin" } asks for it (partial accept).
local M = {}

local ns = vim.api.nvim_create_namespace("synconfroute_ghost")
local state = {} -- bufnr -> shown candidate (see show())
local timers = {} -- bufnr -> debounce timer
local seq = {} -- bufnr -> number of the latest request (older answers are dropped)
local own_tick = {} -- bufnr -> changedtick of our own insertion (no new request for it)

M.ns = ns

local has = require("synconfroute.compat").has

-- The next word of `text`, as VS Code's "Accept Word" takes it: spaces, then a run of word
-- characters or of punctuation; a line break with the next line's indentation alone.
function M.next_word(text)
  if text == "" then
    return ""
  end
  return text:match("^\n[ \t]*") or text:match("^[ \t]*[%w_]+") or text:match("^[ \t]*[^%w_%s]+")
    or text:match("^[ \t]+") or text:sub(1, 1)
end

-- The next line of `text`: up to (not including) its line break; at a line break, the
-- break and the line after it.
function M.next_line(text)
  if text:sub(1, 1) == "\n" then
    return "\n" .. (text:sub(2):match("^[^\n]*") or "")
  end
  return text:match("^[^\n]*") or text
end

-- Byte column of an LSP character offset on `line`, in the client's position encoding
-- (init.lua uses it too).
function M.byte_col(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  if has("0.11") then
    local ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
    return ok and col or #line
  end
  local ok, col = pcall(vim.str_byteindex, line, character, encoding == "utf-16")
  return ok and col or #line
end

function M.clear(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  state[bufnr] = nil
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
end

--- The candidate shown in `bufnr` (nil when none): { text, row, col, ... }.
function M.get(bufnr)
  return state[bufnr or vim.api.nvim_get_current_buf()]
end

local function render(bufnr, s)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  local lines = vim.split(s.text, "\n", { plain = true })
  local opts = {
    virt_text = { { lines[1], s.hl } },
    -- 0.10+ shows it inside the line; before, over what follows the cursor (at the end of
    -- a line, where completions usually are, the two look the same).
    virt_text_pos = has("0.10") and "inline" or "overlay",
    hl_mode = "combine",
  }
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      table.insert(opts.virt_lines, { { lines[i], s.hl } })
    end
  end
  s.mark = vim.api.nvim_buf_set_extmark(bufnr, ns, s.row, s.col, opts)
end

-- Show `item` (an InlineCompletionItem) at the cursor, if it still applies there.
local function show(bufnr, client, item, hooks)
  local text = type(item.insertText) == "table" and item.insertText.value or item.insertText
  if type(text) ~= "string" or text == "" then
    return
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  row = row - 1
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  if item.range then
    -- The server's range starts at the cursor (it replaces nothing before it); text it
    -- covers after the cursor is replaced when the candidate is taken.
    local r = item.range
    if r.start.line ~= row or M.byte_col(line, r.start.character, client.offset_encoding) ~= col then
      return
    end
  end
  local command = item.command
  local id = type(command) == "table" and type(command.arguments) == "table" and command.arguments[1]
  local s = {
    text = text,
    row = row,
    col = col,
    client_id = client.id,
    command = command,
    id = id,
    accepted = false,
    hl = hooks.hl,
  }
  state[bufnr] = s
  render(bufnr, s)
end

--- Ask the server at the cursor (`invoked`: the user asked, no debounce on the server).
function M.request(bufnr, client, invoked, hooks)
  if vim.fn.mode() ~= "i" then
    return
  end
  seq[bufnr] = (seq[bufnr] or 0) + 1
  local mine = seq[bufnr]
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = invoked and 1 or 2 }
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  hooks.request(client, "textDocument/inlineCompletion", params, function(err, result)
    if err then
      if err.code ~= -32800 then -- a cancelled request is not a problem
        hooks.notify("synconfroute: " .. (err.message or tostring(err)), vim.log.levels.WARN)
      end
      return
    end
    -- Too late: the user typed on, moved, or left insert mode.
    if seq[bufnr] ~= mine or vim.fn.mode() ~= "i" or vim.api.nvim_get_current_buf() ~= bufnr
      or vim.api.nvim_buf_get_changedtick(bufnr) ~= tick then
      return
    end
    local items = result and (result.items or result) or {}
    if items[1] then
      show(bufnr, client, items[1], hooks)
    end
  end, bufnr)
end

--- Debounced request after an edit in insert mode.
function M.on_change(bufnr, client, hooks)
  local s = state[bufnr]
  if own_tick[bufnr] == vim.api.nvim_buf_get_changedtick(bufnr) then
    return -- our own insertion (a partial accept): the rest stays shown
  end
  if s then
    M.clear(bufnr)
  end
  local timer = timers[bufnr]
  if timer then
    timer:stop()
  else
    timer = vim.loop.new_timer()
    timers[bufnr] = timer
  end
  timer:start(hooks.debounce_ms, 0, vim.schedule_wrap(function()
    if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_get_current_buf() == bufnr then
      M.request(bufnr, client, false, hooks)
    end
  end))
end

--- The cursor left the candidate's place: it no longer applies.
function M.on_cursor(bufnr)
  local s = state[bufnr]
  if not s then
    return
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  if row - 1 ~= s.row or col ~= s.col then
    M.clear(bufnr)
  end
end

function M.stop(bufnr)
  local timer = timers[bufnr]
  if timer then
    timer:stop()
    timer:close()
    timers[bufnr] = nil
  end
  M.clear(bufnr)
end

--- Insert `how` ("all", "word" or "line") of the candidate shown; false when none is.
-- The accept command goes to the server once, with the first part taken.
function M.accept(bufnr, how, hooks)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local s = state[bufnr]
  if not s then
    return false
  end
  local piece = s.text
  if how == "word" then
    piece = M.next_word(s.text)
  elseif how == "line" then
    piece = M.next_line(s.text)
  end
  local lines = vim.split(piece, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, s.row, s.col, s.row, s.col, lines)
  local row = s.row + #lines - 1
  local col = (#lines == 1 and s.col or 0) + #lines[#lines]
  own_tick[bufnr] = vim.api.nvim_buf_get_changedtick(bufnr)
  vim.api.nvim_win_set_cursor(0, { row + 1, col })
  if not s.accepted then
    s.accepted = true
    hooks.accepted(s, bufnr)
  end
  hooks.inserted(s, bufnr, s.row, s.col, row, col)
  local rest = s.text:sub(#piece + 1)
  if rest == "" then
    M.clear(bufnr)
  else
    s.text, s.row, s.col = rest, row, col
    render(bufnr, s)
  end
  return true
end

return M
