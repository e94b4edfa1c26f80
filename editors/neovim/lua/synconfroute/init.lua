-- synconfroute for Neovim (0.7 and later): starts `synconfroute serve` for code buffers.
--
--   require("synconfroute").setup({
--     cmd = { "synconfroute", "serve" },
--     settings = { ["local"] = { backend = "ollama" }, remote = { url = "http://gpu:8000/v1" } },
--   })
--
-- Neovim 0.12+: inline completion (ghost text), <Tab> accepts. Older versions: the server
-- offers classic completion instead; <C-x><C-u> asks for it (completefunc). K shows the
-- route card (which tier answered, and why) over the line of the last completion.
local M = {}

local NAME = "synconfroute"
local CMD_ACCEPT = "synconfroute.accept"

M.defaults = {
  cmd = { "synconfroute", "serve" },
  filetypes = { "python", "java", "c", "cpp", "javascript", "typescript", "go", "rust" },
  root_markers = {
    ".git", "pyproject.toml", "setup.py", "package.json", "go.mod", "Cargo.toml",
    "pom.xml", "build.gradle", "CMakeLists.txt", "compile_commands.json",
  },
  -- Server settings, the keys of docs/settings.md: { ["local"] = {...}, remote = {...},
  -- routing = {...}, privacy = {...}, completion = {...}, editor = {...} }.
  -- Sent as initializationOptions and answered to workspace/configuration ("synconfroute").
  settings = {},
  inline = true, -- Neovim 0.12+: inline completion; false: classic completion (<C-x><C-u>)
  completefunc = true, -- classic completion: set 'completefunc' in attached buffers
  keys = {
    hover = "K", -- route card of the last completion (falls back to the usual hover)
    accept = "<Tab>", -- 0.12+: accept the inline completion (otherwise types the key)
    next = "<M-]>", -- 0.12+: next / previous inline candidate
    prev = "<M-[>",
  },
  on_attach = nil, -- function(client, bufnr), called after ours
}

M.config = vim.deepcopy(M.defaults)
M.last_route = nil -- one line ("synconfroute: local (confident-and-valid, confidence -0.05)")
M.last_status = nil -- the table returned by synconfroute.status

local function has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO)
end

-- client.request became a method (client:request) in 0.11; the old form warns later on.
local function request(client, method, params, handler, bufnr)
  if has("0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function clients(bufnr)
  local found = {}
  if vim.lsp.get_clients then
    found = vim.lsp.get_clients({ name = NAME, bufnr = bufnr })
  else
    local all = bufnr and vim.lsp.buf_get_clients(bufnr) or vim.lsp.get_active_clients()
    for _, c in pairs(all) do
      if c.name == NAME then
        table.insert(found, c)
      end
    end
  end
  return found
end

local function count_clients(bufnr)
  if vim.lsp.get_clients then
    return #vim.lsp.get_clients({ bufnr = bufnr })
  end
  return vim.tbl_count(vim.lsp.buf_get_clients(bufnr))
end

--- The synconfroute client of `bufnr` (current buffer), else any running one.
function M.client(bufnr)
  return clients(bufnr or vim.api.nvim_get_current_buf())[1] or clients(nil)[1]
end

local function nonempty(t)
  return type(t) == "table" and next(t) ~= nil
end

local function server_config(opts)
  local capabilities = nil
  if not opts.inline then
    -- Without the inlineCompletion capability the server offers classic completion.
    capabilities = vim.lsp.protocol.make_client_capabilities()
    capabilities.textDocument.inlineCompletion = nil
  end
  return {
    name = NAME,
    cmd = opts.cmd,
    capabilities = capabilities,
    init_options = nonempty(opts.settings) and opts.settings or nil,
    -- The server asks workspace/configuration for section "synconfroute".
    settings = { [NAME] = opts.settings },
    on_attach = function(client, bufnr)
      M._attach(client, bufnr)
    end,
  }
end

-- Root directory of `path`: the closest parent holding one of the markers.
local function find_root(path, markers)
  local dir = vim.fn.fnamemodify(path, ":p:h")
  while dir and dir ~= "" do
    for _, m in ipairs(markers) do
      if vim.loop.fs_stat(dir .. "/" .. m) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return vim.fn.fnamemodify(path, ":p:h")
end

local started = {} -- Neovim 0.7: root_dir -> client id

-- Is the server program there? Says how to fix it when not (once per session).
local warned = false
local function executable(cmd)
  if vim.fn.executable(cmd[1]) == 1 then
    return true
  end
  if not warned then
    warned = true
    notify(
      ("synconfroute: %q not found. Install synconfroute (bash scripts/setup.sh) and "
        .. "give its path: require('synconfroute').setup{ cmd = "
        .. "{ '/path/to/.venv/bin/synconfroute', 'serve' } }"):format(cmd[1]),
      vim.log.levels.ERROR
    )
  end
  return false
end

local function start(bufnr)
  local opts = M.config
  local path = vim.api.nvim_buf_get_name(bufnr)
  if path == "" or vim.bo[bufnr].buftype ~= "" then
    return
  end
  if not executable(opts.cmd) then
    return
  end
  local cfg = server_config(opts)
  cfg.root_dir = find_root(path, opts.root_markers)
  if vim.lsp.start then -- 0.8+: reuses a client with the same name and root
    vim.lsp.start(cfg, { bufnr = bufnr })
    return
  end
  local id = started[cfg.root_dir]
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or client.is_stopped() then
    id = vim.lsp.start_client(cfg)
    if not id then
      notify("synconfroute: the language server did not start; see :LspLog", vim.log.levels.ERROR)
      return
    end
    started[cfg.root_dir] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
end

local function server_has(client, capability)
  local caps = client.server_capabilities or client.resolved_capabilities or {}
  return caps[capability] ~= nil and caps[capability] ~= false
end

-- Column (bytes) of an LSP character offset on `line`, in the client's position encoding.
local function byte_col(line, character, encoding)
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

local function documentation(item)
  local doc = item.documentation
  if type(doc) == "table" then
    return doc.value or ""
  end
  return type(doc) == "string" and doc or ""
end

-- 'completefunc' for Neovim without inline completion: asks this server only, so the
-- usual <C-x><C-o> (other language servers) is left alone.
function M.completefunc(findstart, _)
  if findstart ~= 1 then
    return {}
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if not client then
    return -3 -- leave completion mode quietly
  end
  local win = vim.api.nvim_get_current_win()
  local params = vim.lsp.util.make_position_params(win, client.offset_encoding)
  request(client, "textDocument/completion", params, function(err, result)
    if err then
      notify("synconfroute: " .. (err.message or tostring(err)), vim.log.levels.WARN)
      return
    end
    if not result or vim.fn.mode() ~= "i" then
      return
    end
    local line = vim.api.nvim_get_current_line()
    local cursor = vim.api.nvim_win_get_cursor(0)[2]
    local start_col, items = cursor, {}
    for _, item in ipairs(result.items or result) do
      local word = item.insertText or item.label
      if item.textEdit then
        word = item.textEdit.newText
        local range = item.textEdit.range or item.textEdit.insert
        start_col = byte_col(line, range.start.character, client.offset_encoding)
      end
      table.insert(items, {
        word = word,
        abbr = item.label,
        menu = item.detail or "",
        info = documentation(item),
        kind = NAME,
        icase = 1,
        dup = 1,
        empty = 1,
        user_data = {
          synconfroute = {
            client_id = client.id,
            command = item.command,
            detail = item.detail,
            card = documentation(item),
          },
        },
      })
    end
    vim.fn.complete(start_col + 1, items)
  end, bufnr)
  return -2 -- the answer comes asynchronously, through complete()
end

local ns = vim.api.nvim_create_namespace("synconfroute")
local taken = {} -- bufnr -> { mark = extmark id, card = route card } of the last one taken

-- The route card of the completion taken on the cursor's line, if any.
local function taken_card(bufnr)
  local t = taken[bufnr]
  if not t then
    return nil
  end
  local ok, pos = pcall(vim.api.nvim_buf_get_extmark_by_id, bufnr, ns, t.mark, { details = true })
  if not ok or not pos or not pos[1] then
    return nil
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local last = pos[3] and pos[3].end_row or pos[1]
  if row >= pos[1] and row <= last then
    return t.card
  end
end

-- After a completion is taken: record the route, tell the server (accept command), and
-- turn the newlines of a multi-line completion into real lines (complete() inserts NULs).
local function on_complete_done(bufnr)
  local done = vim.v.completed_item
  local data = type(done) == "table" and type(done.user_data) == "table" and done.user_data[NAME]
  if not data then
    return
  end
  M.last_route = data.detail or M.last_route
  local word = done.word or ""
  vim.schedule(function()
    if vim.api.nvim_get_current_buf() ~= bufnr then
      return
    end
    local row, col = unpack(vim.api.nvim_win_get_cursor(0))
    local start = math.max(col - #word, 0)
    local lines = vim.split(word, "\n", { plain = true })
    if #lines > 1 then
      vim.api.nvim_buf_set_text(bufnr, row - 1, start, row - 1, col, lines)
      vim.api.nvim_win_set_cursor(0, { row - 1 + #lines, #lines[#lines] })
    end
    -- Remember where the completion went: the server drops its card at the next edit,
    -- K keeps showing it on these lines.
    if data.card and data.card ~= "" then
      pcall(vim.api.nvim_buf_clear_namespace, bufnr, ns, 0, -1)
      local last_row = row - 1 + #lines - 1
      local mark = vim.api.nvim_buf_set_extmark(bufnr, ns, row - 1, start, {
        end_row = last_row,
        end_col = #lines > 1 and #lines[#lines] or start + #word,
      })
      taken[bufnr] = { mark = mark, card = data.card }
    end
    local client = vim.lsp.get_client_by_id(data.client_id)
    if client and type(data.command) == "table" and data.command.command == CMD_ACCEPT then
      request(client, "workspace/executeCommand", {
        command = data.command.command,
        arguments = data.command.arguments,
      }, function() end, bufnr)
    end
  end)
end

--- Route card of the last completion on this line; the usual hover when there is none.
function M.hover()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if not client then
    return vim.lsp.buf.hover()
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  request(client, "textDocument/hover", params, function(err, result)
    if err or not result or not result.contents then
      local card = taken_card(bufnr)
      if card then
        local lines = vim.split(card, "\n", { plain = true })
        vim.lsp.util.open_floating_preview(lines, "markdown", { focus_id = "synconfroute_hover" })
        return
      end
      if count_clients(bufnr) > 1 then
        vim.lsp.buf.hover() -- other servers may have something to say
      else
        notify("synconfroute: no completion on this line yet", vim.log.levels.INFO)
      end
      return
    end
    local lines = vim.lsp.util.convert_input_to_markdown_lines(result.contents)
    vim.lsp.util.open_floating_preview(lines, "markdown", { focus_id = "synconfroute_hover" })
  end, bufnr)
end

local function execute(command, callback)
  local client = M.client()
  if not client then
    notify("synconfroute: no language server running; open a code file first", vim.log.levels.WARN)
    return
  end
  local params = { command = command, arguments = {} }
  request(client, "workspace/executeCommand", params, function(err, result)
    if err then
      local why = err.message or tostring(err)
      notify(("synconfroute: %s failed: %s"):format(command, why), vim.log.levels.ERROR)
      return
    end
    if callback then
      callback(result)
    end
  end, vim.api.nvim_get_current_buf())
end

--- Ask the server for its status; `callback(status)` gets the table (local, remote, routes...).
function M.status(callback)
  execute("synconfroute.status", function(st)
    M.last_status = st
    if type(st) == "table" and st.last ~= vim.NIL and st.last then
      M.last_route = st.last
    end
    if callback then
      callback(st)
    end
  end)
end

--- Toggle local-only (nothing leaves the machine); `callback(on)`.
function M.toggle_local_only(callback)
  execute("synconfroute.toggleLocalOnly", callback)
end

--- For the statusline: the route of the last completion, or "".
function M.statusline()
  return M.last_route or ""
end

local function map(mode, lhs, rhs, bufnr, desc, expr)
  if lhs and lhs ~= "" then
    vim.keymap.set(mode, lhs, rhs, { buffer = bufnr, desc = desc, expr = expr, silent = true })
  end
end

function M._attach(client, bufnr)
  local opts = M.config
  local keys = opts.keys or {}
  map("n", keys.hover, M.hover, bufnr, "synconfroute: route of the last completion")
  local ic = vim.lsp.inline_completion
  if opts.inline and ic and has("0.12") and server_has(client, "inlineCompletionProvider") then
    ic.enable(true, { bufnr = bufnr })
    map("i", keys.accept, function()
      if not ic.get() then
        return keys.accept
      end
    end, bufnr, "synconfroute: accept the inline completion", true)
    local select = ic.select or ic.jump -- renamed during 0.12 development
    map("i", keys.next, function()
      select({ count = 1 })
    end, bufnr, "synconfroute: next candidate")
    map("i", keys.prev, function()
      select({ count = -1 })
    end, bufnr, "synconfroute: previous candidate")
  elseif server_has(client, "completionProvider") and opts.completefunc then
    -- Classic completion (Neovim < 0.12, or inline = false): <C-x><C-u> asks this server.
    vim.bo[bufnr].completefunc = "v:lua.require'synconfroute'.completefunc"
    vim.api.nvim_create_autocmd("CompleteDone", {
      buffer = bufnr,
      group = vim.api.nvim_create_augroup("synconfroute_done_" .. bufnr, { clear = true }),
      callback = function()
        on_complete_done(bufnr)
      end,
    })
  end
  if opts.on_attach then
    opts.on_attach(client, bufnr)
  end
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  for _, key in ipairs({ "cmd", "filetypes", "root_markers", "settings" }) do
    if opts and opts[key] then
      M.config[key] = opts[key] -- lists are replaced, not merged index by index
    end
  end
  local cfg = M.config

  vim.api.nvim_create_user_command("SynConfRouteStatus", function()
    M.status(function(st)
      if type(st) ~= "table" then
        return
      end
      local r = st.routes or {}
      local fmt = "synconfroute: local %s; remote %s; local-only %s; "
        .. "%d completions (%d local, %d remote, %d none), %d taken; last: %s"
      notify(fmt:format(
        tostring(st["local"]), tostring(st.remote), st.local_only and "on" or "off",
        st.completions or 0, r["local"] or 0, r.remote or 0, r.none or 0, st.accepted or 0,
        (st.last ~= vim.NIL and st.last) or "-"
      ))
    end)
  end, { desc = "synconfroute: tiers, privacy and routes so far" })
  vim.api.nvim_create_user_command("SynConfRouteToggleLocalOnly", function()
    M.toggle_local_only(function(on)
      notify("synconfroute: local-only " .. (on and "ON: nothing leaves this machine" or "off"))
    end)
  end, { desc = "synconfroute: never send code to the remote tier (toggle)" })

  if has("0.11") and vim.lsp.config and vim.lsp.enable then
    executable(cfg.cmd)
    local c = server_config(cfg)
    c.filetypes = cfg.filetypes
    c.root_markers = cfg.root_markers
    vim.lsp.config(NAME, c)
    vim.lsp.enable(NAME)
    return
  end
  local group = vim.api.nvim_create_augroup("synconfroute", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = cfg.filetypes,
    callback = function(args)
      start(args.buf)
    end,
  })
  -- Buffers already open when setup() runs (lazy loading).
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local ft = vim.bo[buf].filetype
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(cfg.filetypes, ft) then
      start(buf)
    end
  end
end

return M
