-- Unit checks of the plugin's pure parts: `nvim -l tests/editors/nvim_unit.lua ROOT`.
vim.opt.rtp:prepend(arg[1] .. "/editors/neovim")
local ghost = require("synconfroute.ghost")
local failures = {}
local function eq(got, want, what)
  if got ~= want then
    table.insert(failures, ("%s: got %q, want %q"):format(what, tostring(got), tostring(want)))
  end
end
-- Next word: spaces, then a run of word characters or of punctuation (VS Code's Accept Word).
for _, c in ipairs({
  { "total = a + b", "total" },
  { " = a + b", " =" },
  { " a + b", " a" },
  { "(b)", "(" },
  { "  ", "  " },
  { "\n    return x", "\n    " },
  { "", "" },
  { "é1", "é" }, -- bytes that are not word characters to Lua: a run of them
}) do
  eq(ghost.next_word(c[1]), c[2], "next_word(" .. c[1] .. ")")
end
-- Next line: up to the line break; at a line break, it and the line after.
for _, c in ipairs({
  { "a + b\n    return a", "a + b" },
  { "\n    return a\nx", "\n    return a" },
  { "\n", "\n" },
  { "one line", "one line" },
}) do
  eq(ghost.next_line(c[1]), c[2], "next_line(" .. c[1] .. ")")
end
if #failures > 0 then
  io.stderr:write(table.concat(failures, "\n") .. "\n")
  os.exit(1)
end
print("nvim unit: all passed")
