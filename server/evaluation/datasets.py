"""Benchmark tasks: HumanEval single-line infilling, SAFIM, and a plain JSONL format of our own.

Every task is seen the way an editor sees it: `prefix` is the text before the cursor,
`suffix` the text after it, and the program that is run is
`prefix + completion + suffix + test_program`.

HumanEval infilling (single-line, multi-line, random-span) masks a span of the solution.
Single-line masks a whole line, newline included (the prompt ends with "\\n", the suffix
starts on the next line). In an editor that is an empty line with the cursor on it, so the
suffix we use starts with that line's "\\n" and the ground truth loses its trailing newline:
`prompt + truth + suffix` is the same program either way. The same move is made for any
masked text that ends with a newline (several whole lines: the cursor on an empty line
again). A task is loaded by what it is, not by its file: one whole line gets the editor's
single-line mode, as the benchmark intends; several lines, or a span starting or ending in
the middle of a line (random-span), get the decision the server makes at that cursor
(`wants_multiline` on the prefix, see `generate.multiline_for`).

Our own format (one JSON object a line, see docs/evaluation.md):

    {"task_id": "parse-1", "language": "python", "prefix": "...", "suffix": "...",
     "tests": [{"input": "1 2\\n", "output": "3"}],      # stdin -> accepted stdout(s)
     "test_program": "...",                              # appended to the file instead
     "ground_truth": "...", "multiline": true,            # both optional
     "context_files": [["util.py", "def helper(): ..."]]} # other files, optional
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ..vocab.errors import UserError

DATA_ENV = "SYNCONFROUTE_DATA"
LANGUAGES = ("python", "java", "cpp")
PLACEHOLDER = "{{completion}}"

Match = Literal["exec", "syntax-match"]


@attrs.frozen
class IOTest:
    """One stdin -> stdout test; the output matches if it equals any accepted output
    token by token (whitespace-insensitive, as SAFIM compares)."""

    input: str
    outputs: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Task:
    dataset: str
    task_id: str
    language: str
    prefix: str
    suffix: str
    truth: str | None = None  # the ground-truth middle, when the dataset has one
    multiline: bool = True  # False: the editor asks for one line (HumanEval single-line)
    io_tests: tuple[IOTest, ...] = ()
    test_program: str = ""  # appended after prefix + completion + suffix
    # "syntax-match": no tests exist (SAFIM API); compare with the ground truth as SAFIM does.
    match: Match = "exec"
    # Cross-file context sent with the task, as (path, text), least relevant first.
    context_files: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        """Unique across datasets (SAFIM block and API reuse the same task ids)."""
        return f"{self.dataset}/{self.task_id}"

    def program(self, completion: str) -> str:
        return self.prefix + completion + self.suffix + self.test_program

    def to_json(self) -> dict[str, Any]:
        d = attrs.asdict(self, recurse=True)
        d["io_tests"] = [{"input": t.input, "outputs": list(t.outputs)} for t in self.io_tests]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Task:
        tests = tuple(IOTest(t["input"], tuple(t["outputs"])) for t in d.get("io_tests", ()))
        return cls(
            dataset=d["dataset"],
            task_id=d["task_id"],
            language=d["language"],
            prefix=d["prefix"],
            suffix=d["suffix"],
            truth=d.get("truth"),
            multiline=d.get("multiline", True),
            io_tests=tests,
            test_program=d.get("test_program", ""),
            match=d.get("match", "exec"),
            context_files=tuple((str(p), str(t)) for p, t in d.get("context_files", ())),
        )


class DatasetError(UserError):
    """A dataset that cannot be read, worded for the user."""


# name -> file name in the data folder (and in the download cache, see download.py)
BUILTIN: dict[str, str] = {
    "humaneval": "humaneval-single-line-infilling.jsonl.gz",
    "safim-block": "safim-block.jsonl.gz",
    "safim-api": "safim-api.jsonl.gz",
}
# SAFIM's control-flow split is part of the SAFIM release but not downloaded by `eval`.
NOT_SHIPPED = {"safim-control": "control_completion.jsonl.gz"}


def env_data_dir() -> Path | None:
    """$SYNCONFROUTE_DATA: a folder that replaces the download (our tests and development
    machines point it at ../shared/data)."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else None


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{n}: not JSON ({exc.msg})") from None
                if not isinstance(obj, dict):
                    raise DatasetError(f"{path}:{n}: expected a JSON object per line")
                yield n, obj
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def _need(obj: dict[str, Any], key: str, where: str, kind: type = str) -> Any:
    if key not in obj:
        raise DatasetError(f"{where}: missing field {key!r}")
    if not isinstance(obj[key], kind):
        raise DatasetError(f"{where}: field {key!r} must be a {kind.__name__}")
    return obj[key]


def one_whole_line(prefix: str, masked: str) -> bool:
    """Whether `masked` (after `prefix`) is exactly one whole line, its newline included:
    a single-line infilling task."""
    return (
        (not prefix or prefix.endswith("\n")) and masked.endswith("\n") and masked.count("\n") == 1
    )


def load_humaneval(path: Path, dataset: str = "humaneval") -> list[Task]:
    out = []
    for n, r in _rows(path):
        where = f"{path}:{n}"
        masked = _need(r, "canonical_solution", where)
        prompt = _need(r, "prompt", where)
        suffix = _need(r, "suffix", where)
        entry = _need(r, "entry_point", where)
        # The masked text's last newline belongs to the suffix (see the module doc); a span
        # that ends inside a line keeps its suffix as it is.
        moved = masked.endswith("\n")
        out.append(
            Task(
                dataset=dataset,
                task_id=_need(r, "task_id", where),
                language="python",
                prefix=prompt,
                suffix="\n" + suffix if moved else suffix,
                truth=masked[:-1] if moved else masked,
                multiline=not one_whole_line(prompt, masked),
                test_program="\n" + _need(r, "test", where) + f"\ncheck({entry})\n",
            )
        )
    return out


def load_safim(path: Path, dataset: str) -> list[Task]:
    out = []
    for n, r in _rows(path):
        where = f"{path}:{n}"
        parts = _need(r, "eval_prompt", where).split(PLACEHOLDER)
        if len(parts) != 2:
            raise DatasetError(f"{where}: eval_prompt must hold {PLACEHOLDER} exactly once")
        raw = r.get("unit_tests") or []
        if isinstance(raw, str):  # the Hugging Face copy stores the list JSON-encoded
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: unit_tests is not JSON ({exc.msg})") from None
        if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
            raise DatasetError(f"{where}: unit_tests must be a list of {{input, output}}")
        tests = tuple(
            IOTest(str(t.get("input", "")), tuple(str(o) for o in t.get("output", ()))) for t in raw
        )
        out.append(
            Task(
                dataset=dataset,
                task_id=_need(r, "task_id", where),
                language=_need(r, "lang", where),
                prefix=parts[0],
                suffix=parts[1],
                truth=_need(r, "ground_truth", where),
                multiline=True,
                io_tests=tests,
                match="exec" if tests else "syntax-match",
            )
        )
    return out


def load_own(path: Path) -> list[Task]:
    """Our plain JSONL format (module doc); the dataset is named after the file."""
    dataset = path.name.removesuffix(".gz").removesuffix(".jsonl")
    out = []
    seen: set[str] = set()
    for n, r in _rows(path):
        where = f"{path}:{n}"
        task_id = str(r.get("task_id", n))
        if task_id in seen:
            raise DatasetError(f"{where}: task_id {task_id!r} appears twice")
        seen.add(task_id)
        language = _need(r, "language", where)
        if language not in LANGUAGES:
            raise DatasetError(
                f"{where}: language {language!r} cannot be run; use one of {', '.join(LANGUAGES)}"
            )
        raw_tests = r.get("tests", [])
        if not isinstance(raw_tests, list):
            raise DatasetError(f"{where}: 'tests' must be a list of {{input, output}} objects")
        tests = []
        for t in raw_tests:
            if not isinstance(t, dict) or "output" not in t:
                raise DatasetError(f"{where}: each test needs 'input' and 'output'")
            outs = t["output"] if isinstance(t["output"], list) else [t["output"]]
            tests.append(IOTest(str(t.get("input", "")), tuple(str(o) for o in outs)))
        program = r.get("test_program", "")
        if not isinstance(program, str):
            raise DatasetError(f"{where}: 'test_program' must be a string")
        if not tests and not program:
            raise DatasetError(
                f"{where}: a task needs 'tests' (stdin/stdout pairs) or a 'test_program'"
            )
        truth = r.get("ground_truth")
        ctx = r.get("context_files", [])
        if not isinstance(ctx, list) or not all(
            isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c) for c in ctx
        ):
            raise DatasetError(f"{where}: 'context_files' must be a list of [path, text] pairs")
        out.append(
            Task(
                dataset=dataset,
                task_id=task_id,
                language=language,
                prefix=_need(r, "prefix", where),
                suffix=_need(r, "suffix", where),
                truth=truth if isinstance(truth, str) else None,
                multiline=bool(r.get("multiline", True)),
                io_tests=tuple(tests),
                test_program=program,
                context_files=tuple((c[0], c[1]) for c in ctx),
            )
        )
    return out


def load_path(name: str, path: Path) -> list[Task]:
    return load_humaneval(path, name) if name == "humaneval" else load_safim(path, name)


def load_file(path: Path) -> list[Task]:
    """A file in any of the supported formats, recognised by its fields."""
    for _, first in _rows(path):
        if "canonical_solution" in first and "entry_point" in first:
            name = path.name.removesuffix(".gz").removesuffix(".jsonl")
            return load_humaneval(path, name)
        if "eval_prompt" in first:
            return load_safim(path, path.name.removesuffix(".gz").removesuffix(".jsonl"))
        return load_own(path)
    raise DatasetError(f"{path} holds no tasks")


def select(
    tasks: Sequence[Task],
    *,
    langs: Iterable[str] | None = None,
    limits: dict[str, int] | None = None,
    default_limit: int | None = None,
    seed: int = 0,
) -> list[Task]:
    """Keep `langs`, then at most the limit per (dataset, language), sampled with `seed`.

    Sampling is deterministic and keeps the dataset's order, so a resumed run and a
    rerun with the same arguments choose the same tasks.
    """
    wanted = set(langs) if langs is not None else None
    groups: dict[tuple[str, str], list[Task]] = {}
    for t in tasks:
        if wanted is None or t.language in wanted:
            groups.setdefault((t.dataset, t.language), []).append(t)
    out: list[Task] = []
    for (dataset, language), items in groups.items():
        limit = (limits or {}).get(dataset, default_limit)
        if limit is not None and limit < len(items):
            rng = random.Random(f"{seed}|{dataset}|{language}")
            keep = sorted(rng.sample(range(len(items)), limit))
            items = [items[i] for i in keep]
        out.extend(items)
    return out
