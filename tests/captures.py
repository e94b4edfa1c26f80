"""A pygls writer that keeps what the server writes, for tests of the protocol layer."""

from __future__ import annotations

import json
from typing import Any


class Capture:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        """The bytes written since the last `take`."""
        out = b"".join(self.chunks)
        self.chunks.clear()
        return out

    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages written so far, in order."""
        out = []
        data = b"".join(self.chunks)
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
            out.append(json.loads(rest[:length]))
            data = rest[length:]
        return out
