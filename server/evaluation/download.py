"""Where each built-in benchmark file comes from: a folder the user names (--data or
$SYNCONFROUTE_DATA), else fetched once from its public release, checked, cached
(`locate`, `load_builtin`). datasets.py reads the files; this module finds them.

Each file has a pinned URL (a commit, not a branch, so the bytes cannot change under us)
and the sha256 of those bytes. `fetch` downloads into a temporary file next to the
target, with a progress line on stderr, checks the sha256 and only then renames it into
place: an interrupted or corrupted download never leaves a file that looks complete, and
two runs downloading at once each write their own temporary file. A cached file is
hashed again on every use (milliseconds for these sizes) and fetched anew if it does not
match.

The cache is platformdirs' user cache dir (~/.cache/synconfroute/datasets on Linux,
following XDG_CACHE_HOME). Offline machines pass `--data DIR` instead; see
docs/evaluation.md for what was verified of these pins and what was not.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

import attrs
import httpx

from . import datasets
from .datasets import DatasetError
from .progress import Progress

CHUNK = 1 << 16


@attrs.frozen(kw_only=True)
class Source:
    """One benchmark file of a public release."""

    file: str  # its name in the cache and in a --data folder
    release_name: str  # its name in the release (also accepted in a --data folder)
    url: str
    sha256: str
    size: int  # bytes; the progress total when the server sends no Content-Length


_HUMANEVAL = (
    "https://raw.githubusercontent.com/openai/human-eval-infilling/"
    "88062ff9859c875d04db115b698ed4b0f0395170/data/"
)
# The SAFIM repository held its data in data/ until the files moved to the Hugging Face
# hub (gonglinyuan/safim), where `unit_tests` is a JSON-encoded string instead of a list
# and the bytes differ. This commit is the one whose evaluate.py reads data/*.jsonl.gz and
# accepts the API split's empty `unit_tests` lists, as the files below have.
_SAFIM = (
    "https://raw.githubusercontent.com/gonglinyuan/safim/"
    "231b148f5bf68a959a07b3454e7dfae6382a7a67/data/"
)

# dataset name (datasets.BUILTIN) -> source
SOURCES: dict[str, Source] = {
    "humaneval": Source(
        file="humaneval-single-line-infilling.jsonl.gz",
        release_name="HumanEval-SingleLineInfilling.jsonl.gz",
        url=_HUMANEVAL + "HumanEval-SingleLineInfilling.jsonl.gz",
        sha256="1277073e7ddce163ef68598c2bca777f688a53df99422f097e37362090f88e1f",
        size=75058,
    ),
    "safim-block": Source(
        file="safim-block.jsonl.gz",
        release_name="block_completion.jsonl.gz",
        url=_SAFIM + "block_completion.jsonl.gz",
        sha256="a6ee546933f3c74a1fa95f544206e9b6467434ab2044ee58e365421a9ced22d4",
        size=3404355,
    ),
    "safim-api": Source(
        file="safim-api.jsonl.gz",
        release_name="api_completion.jsonl.gz",
        url=_SAFIM + "api_completion.jsonl.gz",
        sha256="21e87bc349f7e344ebd3654fe9386a26457f8a46418ccb56751f7d3dc300f911",
        size=45071,
    ),
}


class DownloadError(DatasetError):
    """A benchmark file that could not be fetched."""


class ChecksumError(DownloadError):
    """A downloaded file whose sha256 is not the pinned one (it is not kept)."""


def cache_dir() -> Path:
    import platformdirs  # only `eval` needs it

    return Path(platformdirs.user_cache_dir("synconfroute")) / "datasets"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def find_in(folder: Path, source: Source) -> Path | None:
    """The source's file in a user-given folder, under our name or the release's."""
    for name in (source.file, source.release_name):
        if (folder / name).is_file():
            return folder / name
    return None


def how_to_get(sources: list[Source], folder: Path | None) -> str:
    """Both ways to get the files, for an error message."""
    where = str(folder) if folder else "a folder DIR"
    lines = [
        "Either let `synconfroute eval` download them (no --data, no $SYNCONFROUTE_DATA, a "
        f"machine with internet access): it saves them in {cache_dir()} and checks their "
        "sha256;",
        f"or download them yourself into {where} and pass --data {folder or 'DIR'}:",
    ]
    lines += [f"  {s.url}  (sha256 {s.sha256})" for s in sources]
    lines.append("(the release's file names are accepted as they are)")
    return "\n".join(lines)


def fetch(
    source: Source,
    folder: Path,
    *,
    stream: TextIO | None = None,
    timeout_s: float = 60.0,
) -> Path:
    """`folder/source.file`, downloaded and checked unless a valid copy is already there."""
    target = folder / source.file
    if target.is_file():
        try:
            if sha256_of(target) == source.sha256:
                return target
        except OSError as exc:
            raise DownloadError(f"cannot read the cached {target}: {exc}") from exc
        print(
            f"note: {target} does not match its checksum; downloading it again",
            file=stream or sys.stderr,  # stdout is for the results
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{source.file}.", suffix=".part")
    except OSError as exc:
        raise DownloadError(f"cannot write to the data cache {folder}: {exc}") from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            actual = _download(source, out, stream, timeout_s)
        if actual != source.sha256:
            raise ChecksumError(
                f"checksum mismatch for {source.url}: expected sha256 {source.sha256}, got "
                f"{actual}. The file was not kept. The release may have changed or the "
                "download was altered on the way; pass a copy you trust with --data DIR."
            )
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def _download(source: Source, out: BinaryIO, stream: TextIO | None, timeout_s: float) -> str:
    """Write the body of source.url to `out`; its sha256."""
    h = hashlib.sha256()
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 15.0))
    try:
        # identity: the bytes as published, not a transfer-compressed variant of them
        with httpx.stream(
            "GET",
            source.url,
            follow_redirects=True,
            timeout=timeout,
            headers={"Accept-Encoding": "identity"},
        ) as resp:
            if resp.status_code != 200:
                raise DownloadError(
                    f"cannot download {source.url}: HTTP {resp.status_code} "
                    f"{resp.reason_phrase}".rstrip()
                )
            length = resp.headers.get("content-length", "")
            total = int(length) if length.isdigit() else source.size
            progress = Progress(f"download {source.file}", total, stream=stream, unit="bytes")
            for chunk in resp.iter_bytes(CHUNK):
                h.update(chunk)
                out.write(chunk)
                progress.advance(len(chunk))
            progress.finish()
    except httpx.HTTPError as exc:
        raise DownloadError(f"cannot download {source.url}: {exc or type(exc).__name__}") from exc
    except OSError as exc:
        raise DownloadError(f"cannot write the download of {source.url}: {exc}") from exc
    return h.hexdigest()


def _check_name(name: str) -> None:
    if name in datasets.NOT_SHIPPED:
        raise DatasetError(
            f"{name} is not downloaded by eval: get {datasets.NOT_SHIPPED[name]} from the SAFIM "
            "release and pass it with --file"
        )
    if name not in datasets.BUILTIN:
        known = ", ".join([*datasets.BUILTIN, *datasets.NOT_SHIPPED])
        raise DatasetError(f"unknown dataset {name!r}; known: {known} (or --file PATH)")


def locate(names: Sequence[str], folder: Path | None = None) -> dict[str, Path]:
    """The file of each built-in dataset: in `folder` (--data), else in $SYNCONFROUTE_DATA,
    else downloaded into the cache (checked against its pinned sha256)."""
    for name in names:
        _check_name(name)
    given: Path | None = folder
    origin = "--data"
    if folder is None:
        given, origin = datasets.env_data_dir(), f"${datasets.DATA_ENV}"
    sources = {name: SOURCES[name] for name in names}
    if given is not None:
        found = {name: find_in(given, s) for name, s in sources.items()}
        missing = [sources[name] for name, path in found.items() if path is None]
        if missing:
            raise DatasetError(
                f"{origin} folder {given} lacks {', '.join(s.file for s in missing)}.\n"
                + how_to_get(missing, given)
            )
        return {name: path for name, path in found.items() if path is not None}
    out: dict[str, Path] = {}
    cache = cache_dir()
    for name, source in sources.items():
        try:
            out[name] = fetch(source, cache)
        except ChecksumError:
            raise
        except DownloadError as exc:
            left = [s for n, s in sources.items() if n not in out]
            raise DownloadError(f"{exc}\n" + how_to_get(left, None)) from exc
    return out


def load_builtin(name: str, folder: Path | None = None) -> list[datasets.Task]:
    return datasets.load_path(name, locate([name], folder)[name])
