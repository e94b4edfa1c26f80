-- :checkhealth synconfroute
local M = {}

local h = vim.health or require("health")
local start = h.start or h.report_start
local ok = h.ok or h.report_ok
local warn = h.warn or h.report_warn
local err = h.error or h.report_error

function M.check()
  local sr = require("synconfroute")
  local cmd = sr.config.cmd
  start("synconfroute")
  if vim.fn.executable(cmd[1]) == 1 then
    ok(("server command: %s"):format(table.concat(cmd, " ")))
  else
    err(("%q is not executable"):format(cmd[1]), {
      "Install synconfroute (bash scripts/setup.sh), then point setup() at it:",
      "require('synconfroute').setup{ cmd = { '/path/to/.venv/bin/synconfroute', 'serve' } }",
    })
  end
  local mode = sr.mode()
  local k = sr.config.keys or {}
  if mode == "native" then
    ok("Neovim 0.12+: inline completion (vim.lsp.inline_completion); accept with "
      .. tostring(k.accept or "-"))
  elseif mode == "ghost" then
    ok(("ghost text (the plugin's): accept %s, next word %s, next line %s, dismiss %s, ask %s")
      :format(tostring(k.accept), tostring(k.accept_word), tostring(k.accept_line),
        tostring(k.dismiss), tostring(k.trigger)))
  else
    ok("classic completion through 'completefunc' (<C-x><C-u>) in attached buffers")
  end
  local client = sr.client()
  if client then
    local root = tostring(client.config.root_dir)
    ok(("server running (client id %d, root %s)"):format(client.id, root))
  else
    local fts = table.concat(sr.config.filetypes, ", ")
    warn("no synconfroute server running: open a file of one of " .. fts)
  end
end

return M
