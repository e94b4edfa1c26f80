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
  if vim.fn.has("nvim-0.12") == 1 then
    local key = sr.config.keys.accept or "-"
    ok("Neovim 0.12+: inline completion (ghost text); accept with " .. key)
  else
    ok("Neovim before 0.12: completion through 'completefunc' (<C-x><C-u>) in attached buffers")
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
