"""The open documents, the workspace index, cross-file context and the never-send patterns."""
