"""Test doubles for the servers that cannot run here (Ollama, vLLM).

They are real HTTP/1.1 servers on 127.0.0.1 that speak the wire protocols of
../shared/PROTOCOLS.md, scriptable per test, and they record what they received
and how many tokens they sent before the client went away. Tests, benchmarks
and the LSP end-to-end tests (which start the server in another process) all
reuse them.
"""

from .http import FakeHTTPServer, Request, Responder, TokenScript, closed_port
from .ollama import FakeOllama
from .openai import FakeOpenAI

__all__ = [
    "FakeHTTPServer",
    "FakeOllama",
    "FakeOpenAI",
    "Request",
    "Responder",
    "TokenScript",
    "closed_port",
]
