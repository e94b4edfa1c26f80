"""The `synconfroute` command line and its one-shot commands (complete, doctor)."""
