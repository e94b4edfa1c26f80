-- synconfroute for Neovim (0.7 and later): starts `synconfroute serve` for code buffers.
--
--   require("synconfroute").setup({
--     cmd = { "synconfroute", "serve" },
--     settings = { ["local"] = { backend = "ollama" }, remote = { url = "http://gpu:8000/v1" } },
--   })
--
-- Ghost text as you type: Neovim 0.12+ through vim.lsp.inline_completion, 0.8-0.11
-- through the plugin's own (lua/synconfroute/ghost.lua, which also takes the next word or
-- line). <Tab> accepts. Neovim 0.7 (or inline = false): the server offers classic
-- completion instead; <C-x><C-u> asks for it (completefunc). K shows the route card (which
-- tier answered, and why) over the line of the last completion.
local M = {}

local NAME = "synconfroute"
local CMD_ACCEPT = "synconfroute.accept"
local ROUTE = "synconfroute/route" -- the server's notification: each completion's route
local ghost = require("synconfroute.ghost")

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
  -- true: ghost text (Neovim's own on 0.12+, the plugin's on 0.8-0.11); "plugin": the
  -- plugin's everywhere (partial accept on 0.12+ too); false: classic completion.
  inline = true,
  completefunc = true, -- classic completion: set 'completefunc' in attached buffers
  debounce_ms = 75, -- the plugin's ghost text: wait this long after a keystroke to ask
  -- Tell the server where the cursor rests (synconfroute/cursor) once it has not moved for
  -- this long, and when a buffer gains focus: it prefills the local model's prompt there,
  -- so the first completion starts warm. 0 or false: never.
  cursor_ms = 150,
  keys = {
    hover = "K", -- route card of the last completion (falls back to the usual hover)
    accept = "<Tab>", -- accept the ghost text (otherwise types the key)
    accept_word = "<M-Right>", -- the plugin's ghost text: take its next word
    accept_line = "<M-C-Right>", -- ... its next line
    dismiss = "<C-]>", -- the plugin's ghost text: hide it (otherwise types the key)
    trigger = "<M-\\>", -- the plugin's ghost text: ask now
    next = "<M-]>", -- 0.12+: next / previous inline candidate
    prev = "<M-[>",
  },
  on_attach = nil, -- function(client, bufnr), called after ours
}

M.config = vim.deepcopy(M.defaults)
M.last_route = nil -- one line ("synconfroute: local (confident-and-valid, confidence -0.05)")
M.route = nil -- the last synconfroute/route notification: { route, reasons, confidence, ... }
M.last_status = nil -- the table returned by synconfroute.status
local routes = {} -- completion id -> its route notification (the last few)
local route_ids = {}

local compat = require("synconfroute.compat")
local has, request, notify_server = compat.has, compat.request, compat.notify

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO)
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

--- How completions are shown: "native" (0.12+), "ghost" (the plugin's), "classic".
function M.mode(opts)
  opts = opts or M.config
  if not opts.inline or not has("0.8") then
    return "classic" -- 0.7's extmarks lack what the ghost text needs
  end
  if opts.inline ~= "plugin" and has("0.12") and vim.lsp.inline_completion then
    return "native"
  end
  return "ghost"
end

-- The route of each completion, as data (sent just before the completion).
local function on_route(_, params)
  if type(params) ~= "table" or type(params.summary) ~= "string" then
    return
  end
  M.route = params
  M.last_route = params.summary
  if params.id then
    routes[params.id] = params
    table.insert(route_ids, params.id)
    if #route_ids > 32 then
      routes[table.remove(route_ids, 1)] = nil
    end
  end
  pcall(vim.cmd, "redrawstatus")
end

local function card_text(card)
  if type(card) == "table" then
    return card.value or ""
  end
  return type(card) == "string" and card or ""
end

local function server_config(opts)
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  local mode = M.mode(opts)
  if mode == "classic" then
    -- Without the inlineCompletion capability the server offers classic completion.
    capabilities.textDocument.inlineCompletion = nil
  elseif mode == "ghost" then
    capabilities.textDocument.inlineCompletion = { dynamicRegistration = false }
  end
  return {
    name = NAME,
    cmd = opts.cmd,
    capabilities = capabilities,
    handlers = { [ROUTE] = on_route },
    init_options = nonempty(opts.settings) and opts.settings or nil,
    -- The server asks workspace/configuration for section "synconfroute".
    settings = { [NAME] = opts.settings },
    on_attach = function(client, bufnr)
      M._attach(client, bufnr)
    end,
  }
end

-- The closest folder above `path` holding one of `names` (vim.fs.root where Neovim has
-- it, 0.10+; the same upward search on older ones), or nil.
local function upward(path, names)
  if vim.fs and vim.fs.root then
    return vim.fs.root(path, names)
  end
  local dir = vim.fn.fnamemodify(path, ":p:h")
  while dir and dir ~= "" do
    for _, m in ipairs(names) do
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
  return nil
end

-- Root directory of `path`, found as vim.fs.root finds it: the closest parent holding one
-- of the markers, else the git repository's root; nil (no workspace folder: the server
-- then takes the file's repository, or matches from every folder above) when neither.
-- Never the file's own folder: as a root, a folder named secrets/ would make the
-- user's never_send `secrets/**` match nothing inside it.
function M.root_of(path, markers)
  return upward(path, markers or M.config.root_markers) or upward(path, { ".git" })
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
  cfg.root_dir = M.root_of(path, opts.root_markers)
  if vim.lsp.start then -- 0.8+: reuses a client with the same name and root
    vim.lsp.start(cfg, { bufnr = bufnr })
    return
  end
  local id = started[cfg.root_dir or ""] -- "": the client of files with no root
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or client.is_stopped() then
    id = vim.lsp.start_client(cfg)
    if not id then
      notify("synconfroute: the language server did not start; see :LspLog", vim.log.levels.ERROR)
      return
    end
    started[cfg.root_dir or ""] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
end

local function server_has(client, capability)
  local caps = client.server_capabilities or client.resolved_capabilities or {}
  return caps[capability] ~= nil and caps[capability] ~= false
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
        start_col = ghost.byte_col(line, range.start.character, client.offset_encoding)
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
  local id = type(data.command) == "table" and data.command.arguments and data.command.arguments[1]
  local route = id and routes[id]
  if route then
    M.route, M.last_route = route, route.summary
  end
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
  local r = M.route
  if type(r) ~= "table" then
    return ""
  end
  local conf = type(r.confidence) == "number" and (" %.2f"):format(r.confidence) or ""
  return ("synconfroute: %s%s%s"):format(r.route, conf, r.cacheHit == true and " (cache)" or "")
end

-- Where a completion taken from the ghost text went, for K (as on_complete_done does).
local function remember_taken(s, bufnr, row, col, end_row, end_col)
  local route = s.id and routes[s.id]
  local card = route and card_text(route.card) or ""
  if card == "" then
    return
  end
  local t = taken[bufnr]
  if t and t.id == s.id and t.id ~= nil then
    local ok, pos = pcall(vim.api.nvim_buf_get_extmark_by_id, bufnr, ns, t.mark, {})
    if ok and pos and pos[1] then
      row, col = pos[1], pos[2] -- a partial accept goes on: the mark grows
    end
  end
  pcall(vim.api.nvim_buf_clear_namespace, bufnr, ns, 0, -1)
  local mark = vim.api.nvim_buf_set_extmark(bufnr, ns, row, col, {
    end_row = end_row,
    end_col = end_col,
  })
  taken[bufnr] = { mark = mark, card = card, id = s.id }
end

local function ghost_hooks()
  return {
    request = request,
    notify = notify,
    debounce_ms = M.config.debounce_ms or 75,
    hl = "SynConfRouteGhost",
    accepted = function(s, bufnr)
      local route = s.id and routes[s.id]
      if route then
        M.route, M.last_route = route, route.summary
      end
      local client = vim.lsp.get_client_by_id(s.client_id)
      if client and type(s.command) == "table" and s.command.command == CMD_ACCEPT then
        request(client, "workspace/executeCommand", {
          command = s.command.command,
          arguments = s.command.arguments,
        }, function() end, bufnr)
      end
    end,
    inserted = remember_taken,
  }
end

--- The plugin's ghost text: take all of it ("all"), its next "word" or its next "line".
--- Returns false when none is shown.
function M.accept(how)
  return ghost.accept(vim.api.nvim_get_current_buf(), how or "all", ghost_hooks())
end

--- Hide the ghost text; false when none was shown.
function M.dismiss()
  local bufnr = vim.api.nvim_get_current_buf()
  local shown = ghost.get(bufnr) ~= nil
  ghost.clear(bufnr)
  return shown
end

--- Ask for ghost text at the cursor now.
function M.trigger()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if client then
    ghost.request(bufnr, client, true, ghost_hooks())
  end
end

--- The ghost text shown in the current buffer (nil when none): { text, row, col, ... }.
function M.ghost()
  return ghost.get(vim.api.nvim_get_current_buf())
end

local function attach_ghost(client, bufnr, keys)
  vim.api.nvim_set_hl(0, "SynConfRouteGhost", { link = "Comment", default = true })
  local group = vim.api.nvim_create_augroup("synconfroute_ghost_" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "TextChangedI", "TextChangedP" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      ghost.on_change(bufnr, client, ghost_hooks())
    end,
  })
  vim.api.nvim_create_autocmd("CursorMovedI", {
    group = group,
    buffer = bufnr,
    callback = function()
      ghost.on_cursor(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      ghost.clear(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd("BufUnload", {
    group = group,
    buffer = bufnr,
    callback = function()
      ghost.stop(bufnr)
    end,
  })
  -- Keys that act when ghost text is shown, and are typed as usual when not.
  local function when_shown(key, action)
    return function()
      if ghost.get(bufnr) then
        return "<Cmd>lua require('synconfroute')." .. action .. "<CR>"
      end
      return key
    end
  end
  local function map_expr(lhs, action, desc)
    if lhs and lhs ~= "" then
      vim.keymap.set("i", lhs, when_shown(lhs, action), {
        buffer = bufnr, expr = true, replace_keycodes = true, silent = true, desc = desc,
      })
    end
  end
  map_expr(keys.accept, "accept('all')", "synconfroute: accept the ghost text")
  map_expr(keys.accept_word, "accept('word')", "synconfroute: accept its next word")
  map_expr(keys.accept_line, "accept('line')", "synconfroute: accept its next line")
  map_expr(keys.dismiss, "dismiss()", "synconfroute: hide the ghost text")
  if keys.trigger and keys.trigger ~= "" then
    vim.keymap.set("i", keys.trigger, M.trigger, {
      buffer = bufnr, silent = true, desc = "synconfroute: ask for ghost text now",
    })
  end
end

-- Where the cursor rests. One timer for all buffers: only the focused one's cursor counts,
-- and a new move restarts the wait (moving through a file reports nothing on the way).
local CURSOR = "synconfroute/cursor"
local rest_timer = nil
local last_reported = nil -- "bufnr:row:col:changedtick" of the last report

local function report_cursor()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = clients(bufnr)[1] -- attached to this buffer, and ours (by name)
  if not client or vim.api.nvim_get_mode().mode:sub(1, 1) == "c" then
    return
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local key = ("%d:%d:%d:%d"):format(bufnr, row, col, vim.api.nvim_buf_get_changedtick(bufnr))
  if key == last_reported then
    return
  end
  last_reported = key
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  notify_server(client, CURSOR, { textDocument = params.textDocument, position = params.position })
end

--- Report the cursor once it has rested `cursor_ms` (the server prefills there).
function M.cursor_moved()
  local ms = M.config.cursor_ms
  if not ms or ms <= 0 then
    return
  end
  if not rest_timer then
    rest_timer = vim.loop.new_timer()
  end
  rest_timer:stop()
  rest_timer:start(ms, 0, vim.schedule_wrap(report_cursor))
end

local function attach_cursor(bufnr)
  local group = vim.api.nvim_create_augroup("synconfroute_cursor_" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "BufEnter", "CursorMoved", "CursorMovedI" }, {
    group = group,
    buffer = bufnr,
    callback = M.cursor_moved,
  })
  vim.api.nvim_create_autocmd("BufUnload", {
    group = group,
    buffer = bufnr,
    callback = function()
      pcall(vim.api.nvim_del_augroup_by_id, group)
    end,
  })
  if bufnr == vim.api.nvim_get_current_buf() then
    M.cursor_moved() -- attached: the buffer is open at its cursor
  end
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
  attach_cursor(bufnr)
  local ic = vim.lsp.inline_completion
  local mode = M.mode(opts)
  if mode == "ghost" and server_has(client, "inlineCompletionProvider") then
    attach_ghost(client, bufnr, keys)
  elseif mode == "native" and server_has(client, "inlineCompletionProvider") then
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
  vim.api.nvim_create_user_command("SynConfRouteNextEdit", function()
    local bufnr = vim.api.nvim_get_current_buf()
    local client = M.client(bufnr)
    if not client then
      notify("synconfroute: no language server running; open a code file first", vim.log.levels.WARN)
      return
    end
    vim.api.nvim_set_hl(0, "SynConfRouteGhost", { link = "Comment", default = true })
    vim.api.nvim_set_hl(0, "SynConfRouteNextEditOld", { strikethrough = true, default = true })
    require("synconfroute.next_edit").request(bufnr, client, ghost.byte_col, function(item, err)
      if err then
        notify("synconfroute: next edit failed: " .. (err.message or tostring(err)), vim.log.levels.ERROR)
      elseif not item then
        notify("synconfroute: no next edit here")
      else
        notify(item.command and item.command.title or "synconfroute: next edit shown")
      end
    end)
  end, { desc = "synconfroute: show the edit after this one (copilotInlineEdit)" })
  vim.api.nvim_create_user_command("SynConfRouteNextEditAccept", function()
    if not require("synconfroute.next_edit").accept() then
      notify("synconfroute: no next edit shown")
    end
  end, { desc = "synconfroute: apply the next edit shown" })
  vim.api.nvim_create_user_command("SynConfRouteToggleLocalOnly", function()
    M.toggle_local_only(function(on)
      notify("synconfroute: local-only " .. (on and "ON: nothing leaves this machine" or "off"))
    end)
  end, { desc = "synconfroute: never send code to the remote tier (toggle)" })

  if has("0.11") and vim.lsp.config and vim.lsp.enable then
    executable(cfg.cmd)
    local c = server_config(cfg)
    c.filetypes = cfg.filetypes
    -- Markers, then the git root, never the file's own folder (no root: on_dir(nil)).
    c.root_dir = function(bufnr, on_dir)
      on_dir(M.root_of(vim.api.nvim_buf_get_name(bufnr), cfg.root_markers))
    end
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
