"""Protocol glue: LSP framing and handlers, the only modules that import pygls."""
