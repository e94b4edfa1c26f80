"""Typed settings (defaults < file < environment < LSP options) and their live state."""
