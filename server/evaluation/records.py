"""The run folder: what was generated (records.jsonl), what passed (exec.jsonl), and run.json.

Both JSONL files are append-only and flushed after every line, so an interrupted run
loses at most the task in flight and resumes by skipping what is already there. A line
cut short by a crash is ignored (and reported) when the file is read back.

records.jsonl, one line per task:

    {"v": 1, "key": "humaneval/SingleLineInfilling/HumanEval/0/L0",
     "task": {...the Task, tests included, so the file stands alone...},
     "local":  {"backend", "model", "raw", "text", "tokens": [[text, logprob], ...],
                "logprobs", "finish_reason", "first_token_s", "total_s", "bytes_sent",
                "error", "oracle"},
     "remote": {... the same ...} | null,
     "gate":   {"tree-sitter": {"status", "checker", "line", "column", "message", "elapsed_s"}}}

`raw` is what the model wrote, `text` the completion after `server.routing.text_rules.post_process`
(what the editor would insert). exec.jsonl, one line per distinct (task, completion):

    {"key": "<exec_key>", "task": "<task key>", "passed": true, "outcome": "passed",
     "detail": "", "elapsed_s": 0.03}
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs

from ..vocab.kinds import GateMode
from ..vocab.verdict import Verdict
from .datasets import Task
from .execute import ExecResult

RECORDS = "records.jsonl"
EXECS = "exec.jsonl"
RUN = "run.json"
VERSION = 1


@attrs.frozen(kw_only=True)
class Generation:
    """One tier's answer for one task."""

    backend: str
    model: str
    raw: str
    text: str
    tokens: tuple[tuple[str, float], ...] = ()
    logprobs: bool = True
    finish_reason: str | None = None
    first_token_s: float | None = None
    total_s: float = 0.0
    bytes_sent: int = 0
    context_bytes: int = 0  # cross-file context in the request (task.context_files)
    error: str | None = None  # the backend failed for this task
    oracle: bool = False  # the ground truth standing in for a remote model (an upper bound)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def logprob_values(self) -> tuple[float, ...]:
        return tuple(lp for _, lp in self.tokens)

    def to_json(self) -> dict[str, Any]:
        d = attrs.asdict(self)
        d["tokens"] = [[t, lp] for t, lp in self.tokens]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Generation:
        return cls(
            backend=d["backend"],
            model=d["model"],
            raw=d["raw"],
            text=d["text"],
            tokens=tuple((str(t), float(lp)) for t, lp in d.get("tokens", ())),
            logprobs=d.get("logprobs", True),
            finish_reason=d.get("finish_reason"),
            first_token_s=d.get("first_token_s"),
            total_s=d.get("total_s", 0.0),
            bytes_sent=d.get("bytes_sent", 0),
            context_bytes=d.get("context_bytes", 0),
            error=d.get("error"),
            oracle=d.get("oracle", False),
        )


@attrs.frozen(kw_only=True)
class Record:
    task: Task
    local: Generation
    remote: Generation | None
    gate: dict[GateMode, Verdict] = attrs.field(factory=dict)  # by gate mode

    @property
    def key(self) -> str:
        return self.task.key

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "key": self.key,
            "task": self.task.to_json(),
            "local": self.local.to_json(),
            "remote": self.remote.to_json() if self.remote else None,
            "gate": {m: attrs.asdict(g) for m, g in self.gate.items()},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Record:
        remote = d.get("remote")
        return cls(
            task=Task.from_json(d["task"]),
            local=Generation.from_json(d["local"]),
            remote=Generation.from_json(remote) if remote else None,
            gate={m: Verdict.from_json(g, mode=m) for m, g in (d.get("gate") or {}).items()},
        )


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                # A line cut by a crash: that task runs again.
                print(f"warning: {path}:{n}: incomplete line skipped", file=sys.stderr)
                continue
            if isinstance(obj, dict):
                yield n, obj


class _Appender:
    """Append JSON lines, flushed one by one; safe from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._lock = threading.Lock()

    def append(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        with self._lock:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # A crash may have left a line without its newline: end it first.
                if self.path.is_file() and self.path.stat().st_size:
                    with self.path.open("rb") as fh:
                        fh.seek(-1, 2)
                        torn = fh.read(1) != b"\n"
                else:
                    torn = False
                self._fh = self.path.open("a", encoding="utf-8")
                if torn:
                    self._fh.write("\n")
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class RunFolder:
    """records.jsonl + exec.jsonl + run.json in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.records: dict[str, Record] = {}
        self.execs: dict[str, ExecResult] = {}
        for _, obj in _lines(folder / RECORDS):
            try:
                rec = Record.from_json(obj)
            except (KeyError, TypeError, ValueError) as exc:
                print(f"warning: {folder / RECORDS}: bad record skipped ({exc})", file=sys.stderr)
                continue
            self.records[rec.key] = rec
        for _, obj in _lines(folder / EXECS):
            try:
                self.execs[obj["key"]] = ExecResult(
                    passed=bool(obj["passed"]),
                    outcome=obj["outcome"],
                    detail=obj.get("detail", ""),
                    elapsed_s=obj.get("elapsed_s", 0.0),
                )
            except (KeyError, TypeError):
                continue
        self._rec_out = _Appender(folder / RECORDS)
        self._exec_out = _Appender(folder / EXECS)

    @classmethod
    def locate(cls, path: Path) -> RunFolder:
        """A run folder, or the folder of a records.jsonl path."""
        folder = path.parent if path.is_file() else path
        if not (folder / RECORDS).is_file():
            raise FileNotFoundError(
                f"no {RECORDS} in {folder}: pass the --out folder of a `synconfroute eval` run"
            )
        return cls(folder)

    def info(self) -> dict[str, Any]:
        try:
            data = json.loads((self.folder / RUN).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_info(self, info: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / (RUN + ".tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.folder / RUN)

    def add_record(self, rec: Record) -> None:
        self._rec_out.append(rec.to_json())
        self.records[rec.key] = rec

    def add_exec(self, key: str, task_key: str, result: ExecResult) -> None:
        self._exec_out.append(
            {
                "key": key,
                "task": task_key,
                "passed": result.passed,
                "outcome": result.outcome,
                "detail": result.detail,
                "elapsed_s": round(result.elapsed_s, 4),
            }
        )
        self.execs[key] = result

    def close(self) -> None:
        self._rec_out.close()
        self._exec_out.close()
