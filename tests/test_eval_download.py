"""`eval` fetches the built-in benchmark files, or reads them from --data.

The release host is stood in for by a static file server on 127.0.0.1 (the standard
library's, a real HTTP server on a real socket) that serves the pinned URLs' paths. Where
../shared/data is present, the files served are the real ones, checked against the real
pinned sha256.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import pytest

from synconfroute.server.commands.cli import main
from synconfroute.server.evaluation import datasets, download
from synconfroute.server.evaluation.download import ChecksumError, DownloadError, Source
from tests import eval_fixtures as fx

HAVE_DATA = all((fx.DATA / s.file).is_file() for s in download.SOURCES.values())
needs_data = pytest.mark.skipif(
    not HAVE_DATA, reason=f"benchmark data not found in {fx.DATA} (set {datasets.DATA_ENV})"
)


class FileHost:
    """Serves `files` (URL path -> bytes) and counts the GETs per path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.gets: dict[str, int] = {}
        host = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.gets[self.path] = host.gets.get(self.path, 0) + 1
                body = host.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, source: Source, body: bytes) -> Source:
        """`source` moved to this host, same path; serves `body` there."""
        path = urlsplit(source.url).path
        self.files[path] = body
        return attrs.evolve(source, url=self.base + path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def host() -> Iterator[FileHost]:
    h = FileHost()
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No $SYNCONFROUTE_DATA, and a cache of our own (platformdirs follows XDG)."""
    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "synconfroute" / "datasets"


def payload(n: int = 300_000) -> bytes:
    return bytes((i * 7919) % 251 for i in range(n))


def pinned(body: bytes, name: str = "x.jsonl.gz") -> Source:
    return Source(
        file=name,
        release_name="Release-" + name,
        url="http://release.invalid/data/" + name,
        sha256=hashlib.sha256(body).hexdigest(),
        size=len(body),
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_writes_the_checked_file_and_shows_progress(
    host: FileHost, tmp_path: Path
) -> None:
    body = payload()
    source = host.serve(pinned(body), body)
    err = io.StringIO()
    path = download.fetch(source, tmp_path / "cache", stream=err)
    assert path == tmp_path / "cache" / "x.jsonl.gz"
    assert path.read_bytes() == body
    assert leftovers(tmp_path / "cache") == ["x.jsonl.gz"]  # no temporary file left
    last = err.getvalue().splitlines()[-1]
    assert last.startswith("download x.jsonl.gz: 0.3/0.3 MB (100%)")
    assert last.rstrip().endswith("done")


def test_a_valid_cached_file_is_not_downloaded_again_and_a_damaged_one_is(
    host: FileHost, tmp_path: Path
) -> None:
    body = payload()
    source = host.serve(pinned(body), body)
    cache = tmp_path / "cache"
    download.fetch(source, cache, stream=io.StringIO())
    download.fetch(source, cache, stream=io.StringIO())
    assert host.gets == {"/data/x.jsonl.gz": 1}
    (cache / "x.jsonl.gz").write_bytes(body[:1000])  # e.g. a disk error, a manual edit
    err = io.StringIO()
    download.fetch(source, cache, stream=err)
    assert host.gets == {"/data/x.jsonl.gz": 2}
    assert "does not match its checksum; downloading it again" in err.getvalue()
    assert (cache / "x.jsonl.gz").read_bytes() == body


def test_a_checksum_mismatch_is_an_error_and_the_file_is_not_kept(
    host: FileHost, tmp_path: Path
) -> None:
    body = payload()
    served = body[:-1] + b"\x00"  # one byte changed on the way
    source = host.serve(pinned(body), served)
    with pytest.raises(ChecksumError) as info:
        download.fetch(source, tmp_path / "cache", stream=io.StringIO())
    msg = str(info.value)
    assert source.url in msg
    assert f"expected sha256 {source.sha256}" in msg
    assert f"got {hashlib.sha256(served).hexdigest()}" in msg
    assert "not kept" in msg
    assert leftovers(tmp_path / "cache") == []


def test_server_down_or_file_missing_is_a_clear_error(host: FileHost, tmp_path: Path) -> None:
    body = payload(1000)
    gone = pinned(body)
    gone = attrs.evolve(gone, url=host.base + "/data/elsewhere.jsonl.gz")
    with pytest.raises(DownloadError, match=r"elsewhere\.jsonl\.gz: HTTP 404 Not Found"):
        download.fetch(gone, tmp_path / "cache", stream=io.StringIO())
    gone_host = FileHost()
    down = gone_host.serve(pinned(body), body)
    gone_host.close()  # nothing listens on its port any more
    with pytest.raises(DownloadError) as info:
        download.fetch(down, tmp_path / "cache", stream=io.StringIO())
    assert f"cannot download {down.url}: " in str(info.value)
    assert "refused" in str(info.value).lower()
    assert leftovers(tmp_path / "cache") == []


def test_eval_says_both_ways_when_the_download_fails(
    host: FileHost, no_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = payload(1000)
    ok = host.serve(pinned(body, "a.jsonl.gz"), body)
    dead = attrs.evolve(pinned(body, "b.jsonl.gz"), url=host.base + "/nothing-here")
    monkeypatch.setitem(download.SOURCES, "humaneval", ok)
    monkeypatch.setitem(download.SOURCES, "safim-api", dead)
    with pytest.raises(DownloadError) as info:
        download.locate(["humaneval", "safim-api"])
    msg = str(info.value)
    assert f"cannot download {dead.url}: HTTP 404" in msg
    assert "let `synconfroute eval` download them" in msg and "pass --data DIR" in msg
    assert dead.url in msg.split("\n", 1)[1] and ok.url not in msg  # only what is missing
    assert (no_env / "a.jsonl.gz").read_bytes() == body  # what worked is kept


def test_data_folder_is_used_offline_and_missing_files_are_listed(
    tmp_path: Path, no_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every URL points at a closed port: a download attempt would fail the test.
    for name, s in list(download.SOURCES.items()):
        monkeypatch.setitem(download.SOURCES, name, attrs.evolve(s, url="http://127.0.0.1:9/x"))
    folder = tmp_path / "offline"
    folder.mkdir()
    he = fx.write(folder / "HumanEval-SingleLineInfilling.jsonl.gz", [HE_ROW])  # release name
    assert download.locate(["humaneval"], folder) == {"humaneval": he}
    with pytest.raises(datasets.DatasetError) as info:
        download.locate(["humaneval", "safim-block", "safim-api"], folder)
    msg = str(info.value)
    assert f"--data folder {folder} lacks safim-block.jsonl.gz, safim-api.jsonl.gz" in msg
    assert "let `synconfroute eval` download them" in msg and f"pass --data {folder}" in msg
    assert download.SOURCES["safim-block"].sha256 in msg
    assert not no_env.exists()  # nothing was downloaded


def test_the_environment_variable_replaces_the_download(
    tmp_path: Path, no_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "dev"
    folder.mkdir()
    fx.write(folder / "humaneval-single-line-infilling.jsonl.gz", [HE_ROW])
    monkeypatch.setenv(datasets.DATA_ENV, str(folder))
    (task,) = download.load_builtin("humaneval")
    assert task.task_id == HE_ROW["task_id"]
    with pytest.raises(datasets.DatasetError, match=r"\$SYNCONFROUTE_DATA folder .* lacks"):
        download.load_builtin("safim-api")


def test_safim_unit_tests_as_a_json_string_load_like_a_list(tmp_path: Path) -> None:
    """The Hugging Face copy of SAFIM stores `unit_tests` JSON-encoded."""
    row = {
        "task_id": "block_completion_000001",
        "lang": "python",
        "prompt": "",
        "eval_prompt": "n = int(input())\nprint({{completion}})\n",
        "ground_truth": "n * 2",
    }
    tests = [{"input": "2\n", "output": ["4"]}]
    listed = fx.write(tmp_path / "a.jsonl.gz", [{**row, "unit_tests": tests}])
    encoded = fx.write(tmp_path / "b.jsonl.gz", [{**row, "unit_tests": json.dumps(tests)}])
    a = datasets.load_safim(listed, "safim-block")
    b = datasets.load_safim(encoded, "safim-block")
    assert a == b and a[0].io_tests == (datasets.IOTest("2\n", ("4",)),)
    bad = fx.write(tmp_path / "c.jsonl.gz", [{**row, "unit_tests": "[{"}])
    with pytest.raises(datasets.DatasetError, match="unit_tests is not JSON"):
        datasets.load_safim(bad, "safim-block")


def test_pins_name_the_builtin_files() -> None:
    assert {n: s.file for n, s in download.SOURCES.items()} == datasets.BUILTIN
    for s in download.SOURCES.values():
        assert urlsplit(s.url).scheme == "https"
        assert "/master/" not in s.url and "/main/" not in s.url  # a commit, not a branch


@needs_data
def test_pinned_checksums_are_those_of_the_shared_data_files() -> None:
    for s in download.SOURCES.values():
        path = fx.DATA / s.file
        assert (download.sha256_of(path), path.stat().st_size) == (s.sha256, s.size), s.file


@needs_data
def test_eval_downloads_the_real_files_into_the_user_cache(
    host: FileHost,
    no_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`synconfroute eval` with neither --data nor $SYNCONFROUTE_DATA: the real files, as
    the release host would serve them at the pinned paths, end up in the cache and run."""
    for name, s in list(download.SOURCES.items()):
        monkeypatch.setitem(download.SOURCES, name, host.serve(s, (fx.DATA / s.file).read_bytes()))
    out = tmp_path / "run"
    args = ["eval", "--ceiling-only", "--datasets", "humaneval,safim-api", "--limit", "1"]
    args += ["--langs", "python", "--out", str(out), "--workers", "1"]
    assert main(["--config", str(tmp_path / "none.toml"), *args]) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert "download" not in captured.out  # stdout holds the results only
    assert "download humaneval-single-line-infilling.jsonl.gz: 0.1/0.1 MB (100%)" in err
    assert sorted(p.name for p in no_env.iterdir()) == [
        "humaneval-single-line-infilling.jsonl.gz",
        "safim-api.jsonl.gz",
    ]
    summary = json.loads((out / "ceiling.json").read_text())["ceiling"]
    assert {g.split("/")[0] for g in summary} == {"humaneval", "safim-api"}
    # Again: served from the cache, nothing fetched.
    gets = dict(host.gets)
    assert main(["--config", str(tmp_path / "none.toml"), *args]) == 0
    assert host.gets == gets
    assert "download " not in capsys.readouterr().err


HE_ROW = {
    "task_id": "SingleLineInfilling/HumanEval/0/L0",
    "entry_point": "f",
    "prompt": "def f(x):\n",
    "suffix": "",
    "canonical_solution": "    return x + 1\n",
    "test": "def check(c):\n    assert c(1) == 2\n",
}
