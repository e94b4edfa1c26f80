"""synconfroute's language server and routing core."""

__version__ = "0.1.0"
