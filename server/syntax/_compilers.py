"""The paper's checks: Python `ast.parse`, Java `javalang`, C/C++ `g++ -fsyntax-only`.

Each checker takes the whole text and a deadline and returns a `CompilerResult` with the
compiler's diagnostics as character offsets. The differential question ("did the completion
introduce it?") is answered in `judge`.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import javalang

from ._treesitter import Splice


@attrs.frozen
class Diagnostic:
    """One error; `offset` is a character offset into the checked text (None: not in it)."""

    offset: int | None
    message: str
    fatal: bool = False  # the compiler could not look at the code at all (e.g. missing header)


@attrs.frozen(kw_only=True)
class CompilerResult:
    checker: str
    ok: bool
    diagnostics: tuple[Diagnostic, ...] = ()
    first_error_only: bool = True  # ast and javalang stop at the first error
    timed_out: bool = False
    failure: str = ""  # the checker itself could not run: what to do about it

    @property
    def first(self) -> Diagnostic | None:
        return self.diagnostics[0] if self.diagnostics else None


class _Timeout(Exception):
    pass


def line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


def _offset(starts: list[int], text: str, line1: int, col1: int) -> int:
    """Character offset of a 1-based (line, column in characters), clamped into the text."""
    line = min(max(line1 - 1, 0), len(starts) - 1)
    return min(starts[line] + max(col1 - 1, 0), len(text))


# ---------------------------------------------------------------- Python


def check_python(text: str, deadline: float | None = None) -> CompilerResult:
    """`ast.parse` (compile in exec mode). Runs in C and cannot be interrupted: `deadline` is
    ignored (a 2,500-line file takes a few milliseconds)."""
    del deadline
    try:
        with warnings.catch_warnings():
            # Invalid escape sequences etc. warn on stderr; they are not syntax errors.
            warnings.simplefilter("ignore")
            ast.parse(text, "<completion>", "exec")
    except SyntaxError as exc:
        starts = line_starts(text)
        offset = None
        if exc.lineno is not None:
            offset = _offset(starts, text, exc.lineno, exc.offset or 1)
        return CompilerResult(
            checker="python-ast", ok=False, diagnostics=(Diagnostic(offset, exc.msg),)
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        # ValueError: NUL bytes in the source; the others: absurd nesting.
        return CompilerResult(
            checker="python-ast", ok=False, diagnostics=(Diagnostic(None, str(exc)),)
        )
    return CompilerResult(checker="python-ast", ok=True)


# ---------------------------------------------------------------- Java

_TICK = 512  # check the clock every this many token reads (a power of two)


def _tokens_until(tokens: Iterator[Any], deadline: float | None) -> list[Any]:
    """All of `tokens`, the clock checked between chunks (not per token: a window's check
    is a few hundred tokens, and a generator frame per token was a third of its cost)."""
    if deadline is None:
        return list(tokens)
    out: list[Any] = []
    while True:
        chunk = list(itertools.islice(tokens, _TICK))
        out += chunk
        if len(chunk) < _TICK:
            return out
        if time.monotonic() > deadline:
            raise _Timeout


class _DeadlineTokens(javalang.util.LookAheadListIterator):  # type: ignore[misc]
    """javalang's token list, with a clock check: javalang is pure Python and backtracks,
    so it would otherwise run to the end whatever the budget. `look` and `__next__` are
    javalang's own, inlined with the check: the parser calls them for every decision."""

    def __init__(self, tokens: list[Any], deadline: float | None) -> None:
        super().__init__(tokens)
        self._deadline = deadline
        self._reads = 0

    def __next__(self) -> Any:
        self._reads += 1
        if not self._reads & (_TICK - 1) and self._late():
            raise _Timeout
        try:
            self.value = self.list[self.marker]
        except IndexError:
            raise StopIteration from None
        self.marker += 1
        return self.value

    def look(self, i: int = 0) -> Any:
        self._reads += 1
        if not self._reads & (_TICK - 1) and self._late():
            raise _Timeout
        try:
            self.value = self.list[self.marker + i]
        except IndexError:
            return self.default
        return self.value

    def _late(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline


def check_java(text: str, deadline: float | None = None) -> CompilerResult:
    """`javalang.parse.parse`, as the paper does, with the deadline checked while it runs."""
    tokenizer = javalang.tokenizer.JavaTokenizer(text)
    try:
        tokens = _tokens_until(tokenizer.tokenize(), deadline)
        parser = javalang.parser.Parser([])
        parser.tokens = _DeadlineTokens(tokens, deadline)
        parser.tokens.set_default(javalang.tokenizer.EndOfInput(None))
        parser.parse()
    except _Timeout:
        return CompilerResult(checker="javalang", ok=False, timed_out=True)
    except javalang.tokenizer.LexerError as exc:
        # tokenizer.i is where the bad token starts, in the text after unicode-escape
        # decoding (the same text unless it has \\uXXXX escapes).
        data = getattr(tokenizer, "data", text)
        lex_at: int | None = tokenizer.i if len(data) == len(text) else None
        message = str(exc).split(" at ", 1)[0]
        return CompilerResult(
            checker="javalang", ok=False, diagnostics=(Diagnostic(lex_at, message),)
        )
    except javalang.parser.JavaSyntaxError as exc:
        at = exc.at
        position = getattr(at, "position", None)
        if position is not None:
            offset: int | None = _offset(line_starts(text), text, position[0], position[1])
        else:
            offset = len(text)  # end of input
        value = getattr(at, "value", None)
        message = exc.description or "syntax error"
        if value:
            message = f"{message} at '{value}'"
        return CompilerResult(
            checker="javalang", ok=False, diagnostics=(Diagnostic(offset, message),)
        )
    except javalang.parser.JavaParserBaseException as exc:
        return CompilerResult(
            checker="javalang", ok=False, diagnostics=(Diagnostic(None, str(exc) or "error"),)
        )
    except RecursionError:
        return CompilerResult(
            checker="javalang", ok=False, diagnostics=(Diagnostic(None, "nesting too deep"),)
        )
    except (TypeError, AttributeError, IndexError, StopIteration) as exc:
        # javalang trips over its own end-of-input token on some unfinished code
        # (`token.value in '[.'` with value None): the code ends where it must not.
        return CompilerResult(
            checker="javalang",
            ok=False,
            diagnostics=(Diagnostic(None, f"unexpected end of code ({type(exc).__name__})"),),
        )
    return CompilerResult(checker="javalang", ok=True)


# ---------------------------------------------------------------- C and C++


@attrs.frozen(kw_only=True)
class CompilerConfig:
    """How to run the C/C++ compilers.

    `pch_dir`: a folder for a precompiled `<bits/stdc++.h>` (about 100 MB; ~3 s to build
    with `prepare_pch`). When the header is precompiled there, a check of a file that starts
    with `#include <bits/stdc++.h>` takes ~0.15 s instead of ~0.9 s. Checks never build it.
    """

    gxx: str = "g++"
    gcc: str = "gcc"
    cxx_std: str = "c++17"
    c_std: str = "c17"
    pch_dir: Path | None = None


DEFAULT_CONFIG = CompilerConfig()

_DIAG = re.compile(r"^<stdin>:(\d+):(\d+): (fatal error|error): (.*)$")
_OTHER_DIAG = re.compile(r"^(?!<stdin>)[^:\n]+:\d+:\d+: (fatal error|error): (.*)$")
_version_cache: dict[str, str] = {}

_pch_lock = threading.Lock()


def _compiler_version(exe: str) -> str:
    if exe not in _version_cache:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        _version_cache[exe] = out.stdout.splitlines()[0] if out.stdout else exe
    return _version_cache[exe]


def _pch_include_dir(config: CompilerConfig) -> Path | None:
    if config.pch_dir is None:
        return None
    exe = shutil.which(config.gxx)
    if exe is None:
        return None
    key = hashlib.sha256(f"{_compiler_version(exe)}|{config.cxx_std}".encode()).hexdigest()[:16]
    return config.pch_dir / key


def prepare_pch(config: CompilerConfig) -> Path | None:
    """Build the precompiled `<bits/stdc++.h>` in `config.pch_dir` if missing.

    Returns the include folder to use, or None when there is nothing to do (no pch_dir, no
    g++, or the header does not exist on this system).
    """
    inc = _pch_include_dir(config)
    if inc is None:
        return None
    target = inc / "bits" / "stdc++.h.gch"
    with _pch_lock:
        if target.exists():
            return inc
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=inc) as work:
            # g++ wants a file (not stdin) for a header; ours just includes the real one.
            src = Path(work) / "stdcxx.h"
            src.write_text("#include <bits/stdc++.h>\n")
            tmp = Path(work) / "stdc++.h.gch"
            out = subprocess.run(
                [
                    config.gxx,
                    "-x",
                    "c++-header",
                    f"-std={config.cxx_std}",
                    str(src),
                    "-o",
                    str(tmp),
                ],
                capture_output=True,
                timeout=120,
                check=False,
            )
            if out.returncode != 0:
                return None
            os.replace(tmp, target)  # atomic: a concurrent check sees all of it or nothing
    return inc


def check_gcc(
    text: str,
    deadline: float | None = None,
    *,
    cplusplus: bool = True,
    config: CompilerConfig = DEFAULT_CONFIG,
) -> CompilerResult:
    """`g++ -fsyntax-only -x c++ -std=c++17` (or gcc for C) on stdin, killed at `deadline`."""
    exe_name = config.gxx if cplusplus else config.gcc
    checker = "g++" if cplusplus else "gcc"
    exe = shutil.which(exe_name)
    if exe is None:
        pkg = "g++" if cplusplus else "gcc"
        return CompilerResult(
            checker=checker,
            ok=False,
            failure=f"{exe_name} not found on PATH: install it (e.g. `apt-get install {pkg}`)"
            " or use the tree-sitter mode",
        )
    args = [exe, "-fsyntax-only", "-x", "c++" if cplusplus else "c"]
    args.append(f"-std={config.cxx_std if cplusplus else config.c_std}")
    args += [
        "-w",  # warnings are not syntax errors, and they slow the parse of the output
        "-fdiagnostics-color=never",
        "-fno-diagnostics-show-caret",
        "-fdiagnostics-column-unit=byte",
        "-fmax-errors=50",
    ]
    if cplusplus:
        inc = _pch_include_dir(config)
        if inc is not None and (inc / "bits" / "stdc++.h.gch").exists():
            args += ["-I", str(inc)]
    args.append("-")
    timeout = None
    if deadline is not None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            return CompilerResult(checker=checker, ok=False, timed_out=True)
    data = text.encode("utf-8", "surrogatepass")
    try:
        out = subprocess.run(
            args,
            input=data,
            capture_output=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "LC_ALL": "C"},  # ASCII quotes in messages
        )
    except subprocess.TimeoutExpired:
        return CompilerResult(checker=checker, ok=False, timed_out=True)
    except OSError as exc:
        return CompilerResult(
            checker=checker, ok=False, failure=f"could not run {exe}: {exc}; check the install"
        )
    if out.returncode == 0:
        return CompilerResult(checker=checker, ok=True, first_error_only=False)
    lines = data.split(b"\n")
    byte_starts = [0]
    for ln in lines[:-1]:
        byte_starts.append(byte_starts[-1] + len(ln) + 1)
    diags: list[Diagnostic] = []
    for raw in out.stderr.decode("utf-8", "replace").splitlines():
        m = _DIAG.match(raw)
        if m:
            line = min(max(int(m.group(1)) - 1, 0), len(lines) - 1)
            col = max(int(m.group(2)) - 1, 0)
            # byte column -> character offset
            before = data[: byte_starts[line] + col]
            offset = len(before.decode("utf-8", "replace"))
            fatal = m.group(3) == "fatal error"
            diags.append(Diagnostic(offset, m.group(4), fatal=fatal))
            continue
        m = _OTHER_DIAG.match(raw)
        if m:  # an error inside a header, caused by our code or not: no position in ours
            diags.append(Diagnostic(None, m.group(2), fatal=m.group(1) == "fatal error"))
    if not diags:
        tail = out.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return CompilerResult(
            checker=checker,
            ok=False,
            first_error_only=False,
            failure=f"{exe_name} failed without a diagnostic we understand: {tail[0]}",
        )
    return CompilerResult(
        checker=checker, ok=False, diagnostics=tuple(diags), first_error_only=False
    )


def run_checker(
    name: str, text: str, deadline: float | None, config: CompilerConfig = DEFAULT_CONFIG
) -> CompilerResult:
    if name == "python-ast":
        return check_python(text, deadline)
    if name == "javalang":
        return check_java(text, deadline)
    if name == "g++":
        return check_gcc(text, deadline, cplusplus=True, config=config)
    if name == "gcc":
        return check_gcc(text, deadline, cplusplus=False, config=config)
    raise ValueError(f"unknown checker {name!r}")


# ---------------------------------------------------------------- the differential


_LINE_REF = re.compile(r"\bline \d+")


def _norm(message: str) -> str:
    """A message without its line references ("... 'if' statement on line 24"), which move
    when the completion adds lines."""
    return _LINE_REF.sub("line N", message)


@attrs.frozen
class Judgement:
    """The compiler's answer to "did the completion introduce an error?".

    `introduced` None: the compiler cannot tell (it failed on the buffer without the
    completion too, in a way that hides the completion); the caller falls back to
    tree-sitter's differential verdict.
    """

    introduced: bool | None
    diagnostic: Diagnostic | None = None
    reason: str = ""


def judge(before: CompilerResult | None, after: CompilerResult, splice: Splice) -> Judgement:
    """Decide from the compiler's results on the text without (`before`) and with the
    completion (`after`). `splice` is in characters here.

    - after compiles: valid.
    - after fails, before compiles: the completion broke it.
    - both fail, and a diagnostic lands inside the completion: broken by it.
    - both fail, first-error checkers (ast, javalang): the first error sits after the
      completion at the before-text's first error, moved, with another message: the
      completion changed what the parser expected there, its fault. Any other case is
      undecided: the first error is before the completion (the compiler never got to it),
      at a new place after it, or the very same old error (the completion parsed, but may
      have failed to fix what the hole broke).
    - both fail, g++: every after-diagnostic outside the completion that the before text
      had too (same message at the same moved place, or same message without a place) is
      pre-existing; any other is introduced. A fatal error (missing header) leaves g++ blind:
      undecided.
    """
    if after.ok:
        return Judgement(False)
    first = after.first
    if before is not None and before.ok:
        return Judgement(True, first, "fails only with the completion")
    if before is None:
        return Judgement(None, first, "no result for the text without the completion")
    lo, hi = splice.start, splice.new_end

    def inside(d: Diagnostic) -> bool:
        return d.offset is not None and lo <= d.offset <= hi

    def moved(d: Diagnostic) -> int | None:
        if d.offset is None:
            return None
        if d.offset < splice.start:
            return d.offset
        return d.offset + splice.delta if d.offset >= splice.old_end else None

    if any(d.fatal for d in after.diagnostics):
        return Judgement(None, first, f"{after.checker} stopped at a fatal error")
    if after.first_error_only:
        assert first is not None
        if inside(first):
            return Judgement(True, first, "the first error is in the completion")
        b = before.first
        if b is not None and first.offset is not None and first.offset > hi:
            if moved(b) == first.offset and _norm(b.message) == _norm(first.message):
                # The old error, untouched. Not proof the completion is right: it may have
                # failed to fix what the hole broke (a wrong indentation keeps Python's
                # "unindent does not match" where it was). tree-sitter looks closer.
                return Judgement(None, first, "the only error seen is the one already there")
            if moved(b) == first.offset:
                # Same token, another complaint: the completion changed what the parser
                # expected there (e.g. it left a bracket open before the token).
                return Judgement(True, first, "the completion changes the error after it")
        return Judgement(None, first, "the first error hides the completion")
    seen = {(moved(d), _norm(d.message)) for d in before.diagnostics}
    for d in after.diagnostics:
        if inside(d) or (d.offset, _norm(d.message)) not in seen:
            return Judgement(True, d, "an error that the text without the completion lacks")
    return Judgement(False, first, "only errors already there")
