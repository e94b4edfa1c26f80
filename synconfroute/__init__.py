"""synconfroute: private AI code completion (a language server and its model backends).

One import package. Its two halves live in the repository's top-level folders and are
linked in here: `synconfroute.server` (the language server and routing core, `server/`)
and `synconfroute.clients` (the model backends, `clients/`).
"""

from .server import __version__

__all__ = ["__version__"]
