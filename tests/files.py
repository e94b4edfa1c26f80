"""Files that exist: the egress gate sends a file's code only while the file exists as a
regular file (privacy by allow-list, docs/privacy.md), so a test that escalates names a
real file. They live in one temporary folder per test run, in no git repository.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

BASE = Path(tempfile.mkdtemp(prefix="synconfroute-files-"))
atexit.register(shutil.rmtree, BASE, ignore_errors=True)


def existing(rel: str, text: str = "") -> str:
    """The absolute path of `rel` under the run's folder, created (empty) if missing."""
    path = BASE / rel.lstrip("/")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return str(path)
