"""Cost of the resynchronising frame parser (server/protocol/frames.py), in 64 KB reads.

    python -m bench.transport

Prints milliseconds per case: a 10 MB didOpen body on one line (what clients send), the
same bytes with a raw newline every 80 (the worst case for the header search), 1,000 small frames,
and 64 MB of bytes skipped after a refused oversized header; json.loads for scale.
"""

from __future__ import annotations

import argparse
import json
import time

from synconfroute.server.protocol.frames import MAX_BODY_BYTES, FrameParser

CHUNK = 1 << 16


def frame(body: bytes) -> bytes:
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def run(stream: bytes) -> tuple[float, int]:
    parser = FrameParser()
    t0 = time.perf_counter()
    events = 0
    for i in range(0, len(stream), CHUNK):
        events += len(parser.feed(stream[i : i + CHUNK]))
    return (time.perf_counter() - t0) * 1000, events


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    text = ("x = 1  # some code\n" * 550_000)[: 10 * 1024 * 1024]
    msg = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"text": text}}
    one_line = json.dumps(msg).encode()
    pretty = b"\n".join(one_line[i : i + 80] for i in range(0, len(one_line), 80))
    small = b"".join(frame(json.dumps({"jsonrpc": "2.0", "id": i}).encode()) for i in range(1000))
    skipped = f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode() + b"a" * MAX_BODY_BYTES
    cases = {
        "10 MB body, one line": frame(one_line),
        "10 MB body, raw newline every 80 B": frame(pretty),
        "1,000 small frames": small,
        "64 MB skipped after a refused header": skipped,
    }
    for name, stream in cases.items():
        ms, events = run(stream)
        print(f"{name:40} {ms:8.1f} ms  ({events} events, {len(stream) / 1e6:.1f} MB)")
    t0 = time.perf_counter()
    json.loads(one_line)
    ms = (time.perf_counter() - t0) * 1000
    print(f"{'for scale: json.loads of the 10 MB body':40} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
