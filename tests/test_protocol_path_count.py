"""bench.protocol_path --count finds every stage of a request in the real server: the
markers it cuts by (TransportProtocol.handle_message, lsp.inline_completion and
inline_list, the stdout write and flush, the next read) still exist under those names,
so a rename shows here, not as a silent zero in the next person's figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(300)


def test_the_count_sees_each_stage_of_every_request() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "bench.protocol_path", "--count", "--rounds", "3"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "(3 requests, stub session)" in out.stdout, out.stdout
    counts = {
        m.group(1).strip(): (float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^  (\S.*?)\s+([\d.]+) Python\s+([\d.]+) C", out.stdout, re.M)
    }
    assert list(counts) == [
        "frame + json + structure",
        "dispatch -> handler",
        "result -> response bytes",
        "write + flush",
        "after the flush",
    ], out.stdout
    # Each stage did something: Python calls in all but the write itself, whose C calls
    # (the stream's write and flush) are all it is.
    for stage, (py, c) in counts.items():
        assert c > 0, (stage, out.stdout)
        assert py > 0 or stage == "write + flush", (stage, out.stdout)
