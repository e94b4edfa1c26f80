-- What differs between the Neovim versions the plugin supports (0.7 to 0.12), in one
-- place: client.request and client.notify became methods (client:request) in 0.11, and
-- the old form warns there.
local M = {}

function M.has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

function M.request(client, method, params, handler, bufnr)
  if M.has("0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.notify(client, method, params)
  if M.has("0.11") then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

return M
