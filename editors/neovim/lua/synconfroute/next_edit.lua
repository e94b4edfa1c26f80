-- Next-edit suggestions: asks the server for textDocument/copilotInlineEdit at the cursor,
-- shows the edit as virtual text (the text it replaces struck through, the new text as
-- virtual lines below it), and applies it on accept, running the edit's command (which
-- records the acceptance). Commands: :SynConfRouteNextEdit, :SynConfRouteNextEditAccept.
local M = {}

local ns = vim.api.nvim_create_namespace("synconfroute_next_edit")
local state = {} -- bufnr -> { item, client_id, encoding }

local compat = require("synconfroute.compat")
local call, tell = compat.request, compat.notify

local function version_of(bufnr)
  local versions = vim.lsp.util.buf_versions
  return versions and versions[bufnr] or vim.api.nvim_buf_get_changedtick(bufnr)
end

--- The suggestion shown in `bufnr` (nil when none): { item, client_id, encoding }.
function M.get(bufnr)
  return state[bufnr or vim.api.nvim_get_current_buf()]
end

function M.clear(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  state[bufnr] = nil
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
end

local function render(bufnr, s, byte_col)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  local r = s.item.range
  local function line(n)
    return vim.api.nvim_buf_get_lines(bufnr, n, n + 1, false)[1] or ""
  end
  local sc = byte_col(line(r.start.line), r.start.character, s.encoding)
  local ec = byte_col(line(r["end"].line), r["end"].character, s.encoding)
  vim.api.nvim_buf_set_extmark(bufnr, ns, r.start.line, sc, {
    end_row = r["end"].line,
    end_col = ec,
    hl_group = "SynConfRouteNextEditOld",
  })
  -- The lines as they will read: the replaced range's lines with the new text in place.
  local first, last = line(r.start.line), line(r["end"].line)
  local after = first:sub(1, sc) .. s.item.text .. last:sub(ec + 1)
  local virt = {}
  for _, l in ipairs(vim.split(after, "\n", { plain = true })) do
    table.insert(virt, { { l, "SynConfRouteGhost" } })
  end
  vim.api.nvim_buf_set_extmark(bufnr, ns, r["end"].line, 0, { virt_lines = virt })
end

--- Ask for the next edit at the cursor of `bufnr` with `client`; `done(item or nil)`.
function M.request(bufnr, client, byte_col, done)
  local pos = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr), version = version_of(bufnr) },
    position = pos,
  }
  call(client, "textDocument/copilotInlineEdit", params, function(err, result)
    local item = not err and result and result.edits and result.edits[1] or nil
    if item then
      local s = { item = item, client_id = client.id, encoding = client.offset_encoding }
      state[bufnr] = s
      render(bufnr, s, byte_col)
      tell(client, "textDocument/didShowInlineEdit", { item = item })
    end
    if done then
      done(item, err)
    end
  end, bufnr)
end

--- Apply the suggestion shown in `bufnr` and run its command; false when none is shown.
function M.accept(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local s = state[bufnr]
  if not s then
    return false
  end
  M.clear(bufnr)
  local edit = { range = s.item.range, newText = s.item.text }
  vim.lsp.util.apply_text_edits({ edit }, bufnr, s.encoding)
  local client = vim.lsp.get_client_by_id(s.client_id)
  local command = s.item.command
  if client and type(command) == "table" then
    local params = { command = command.command, arguments = command.arguments }
    call(client, "workspace/executeCommand", params, function() end, bufnr)
  end
  return true
end

return M
