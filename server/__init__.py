"""synconfroute's language server and routing core."""

if __name__ != "synconfroute.server":
    # One import package: loaded as top-level `server` (e.g. `python -m server` from a
    # checkout), its modules would exist twice under two names. Say so instead.
    raise ImportError(f"import synconfroute.server (not {__name__}); run `python -m synconfroute`")


__version__ = "0.1.0"
