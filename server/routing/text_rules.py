"""The text rules: how a model's raw generation becomes what is judged and shown.

Pure functions of text (no model, no settings object): where a completion ends, what a
length cut drops, the whole-line runs a rejected multi-line completion is trimmed to.
The pipeline applies them per tier; the evaluation and the benchmarks apply the same
ones offline, so what they measure is what the editor shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

from synconfroute.clients.types import line_end

from ..vocab.record import Truncation
from ..vocab.verdict import Verdict

# Where post_process would cut anyway: let the model stop there (saves tokens).
REQUEST_STOPS = ("\n```", "\n\n\n")


def request_stops(*, single_line: bool) -> tuple[str, ...]:
    """The stop strings to send. None for a single line: it ends at its first newline
    anyway, and a stop string starting with one makes the backends hold each newline
    back until the next token shows it is no stop, one wasted token per completion."""
    return () if single_line else REQUEST_STOPS


def wants_multiline(prefix: str, setting: bool) -> bool:
    """Multi-line completions only where a block may start.

    With code before the cursor on its line ("return |", "x = f(a, |"), the user is
    finishing that line: small models otherwise run on into unrelated code. After a
    block opener (":", "{", "(", "[") or on a blank line, several lines are allowed.
    """
    if not setting:
        return False
    line = prefix.rsplit("\n", 1)[-1].rstrip()
    return not line.strip() or line.endswith((":", "{", "(", "["))


def post_process(text: str, suffix: str, *, multiline: bool) -> str:
    """Cut a raw completion to what should be inserted.

    - single-line mode keeps the first line (after a leading newline, if any);
    - a Markdown fence or two blank lines end the completion;
    - a completion that starts re-typing the code after the cursor (the first
      non-blank line of the suffix) is cut before that line: small FIM models
      often continue past the hole.
    """
    if not multiline:
        end = line_end(text)
        text = text if end < 0 else text[:end]
    # Chat-tuned small models close code with a Markdown fence and then explain it;
    # two blank lines in a row end a block in every language we serve.
    for marker in ("\n```", "\n\n\n"):
        cut = text.find(marker)
        if cut >= 0:
            text = text[:cut]
    # (one line: nothing to cut there, and the suffix, up to hundreds of lines, unread)
    anchor = first_code_line(suffix) if "\n" in text else ""
    if len(anchor) >= 3:
        lines = text.split("\n")
        for i in range(1, len(lines)):
            if lines[i].strip() == anchor:
                text = "\n".join(lines[:i])
                break
    return text.rstrip() if text.strip() == "" else text


def first_code_line(text: str) -> str:
    """The first line of `text` (split at "\\n") that is not blank, stripped ("": none),
    read line by line up to it."""
    start = 0
    while True:
        end = text.find("\n", start)
        line = (text[start:] if end < 0 else text[start:end]).strip()
        if line or end < 0:
            return line
        start = end + 1


def drop_last_line(text: str) -> str:
    """`text` without its last line (whole or partial) and the line break before it."""
    end = text.rfind("\n")
    if end <= 0:
        return ""
    return text[: end - 1] if text[end - 1] == "\r" else text[:end]


def close_line(text: str, suffix: str) -> str:
    """A multi-line text trimmed to whole lines, with the break that ended its last line
    when code follows the cursor on its line: without it the kept line would run into
    that code (`s += x    return s`). On an empty line the break is left out, as the
    editor's own line break follows."""
    if text.strip() and suffix.split("\n", 1)[0].strip() and not text.endswith("\n"):
        return text + ("\r\n" if "\r\n" in text else "\n")
    return text


def shown_text(
    raw: str, finish_reason: str | None, suffix: str, *, multiline: bool
) -> tuple[str, Truncation | None]:
    """A tier's raw generation as it is judged and shown, and what a length cut dropped.

    A generation that hit max_tokens (finish reason "length") ends in the middle of a
    line: it is trimmed back to its last complete line before `post_process`, so
    neither the gate nor the user sees a half-written statement.
    """
    text = post_process(raw, suffix, multiline=multiline)
    if finish_reason != "length":
        return text, None
    trimmed = post_process(drop_last_line(raw), suffix, multiline=multiline)
    if multiline:
        trimmed = close_line(trimmed, suffix)
    return trimmed, None if trimmed == text else truncation(text, trimmed)


def truncation(before: str, after: str) -> Truncation:
    def lines(t: str) -> int:
        return t.count("\n") + 1 if t else 0

    return Truncation(chars=max(0, len(before) - len(after)), lines=lines(before) - lines(after))


def whole_line_runs(text: str, suffix: str = "") -> Iterator[str]:
    """`text`, then ever shorter runs of its leading whole lines (never the empty one),
    each ended as `close_line` ends it before `suffix`."""
    first = True
    while text.strip():
        yield text if first else close_line(text, suffix)
        first = False
        text = drop_last_line(text.rstrip("\r\n") if text.endswith("\n") else text)


# Python keywords that continue the compound statement above them, and the headers each
# may follow: code after the cursor that starts with one needs the run before it to end
# inside such a statement's block.
_CONTINUES = {
    "elif": ("if", "elif"),
    "else": ("if", "elif", "for", "while", "try", "except", "async"),
    "except": ("try", "except"),
    "finally": ("try", "except", "else"),
}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _word(line: str) -> str:
    return line.strip().split(":", 1)[0].split(" ", 1)[0].split("(", 1)[0]


def open_at_cut(run: str, suffix: str, language: str) -> bool:
    """Would this whole-line run of a text its token budget cut leave the code broken in
    a way a gate that tolerates a file already broken at the cursor lets through?

    - its last line opens a block (`:` in Python, `{` elsewhere): the body was cut off;
    - Python, the code after the cursor continues a compound statement (`elif`, `else`,
      `except`, `finally` at indentation I): the run's last line at indentation I or
      less must be a header that statement may follow (`if` for `elif`...), else the
      suffix's `elif` is left without its `if`.
    """
    lines = [ln for ln in run.split("\n") if ln.strip()]
    if not lines:
        return False
    last = lines[-1].split("#", 1)[0].rstrip() if language == "python" else lines[-1].rstrip()
    if last.endswith(":" if language == "python" else "{"):
        return True
    if language != "python":
        return False
    after = next((ln for ln in suffix.split("\n") if ln.strip()), "")
    heads = _CONTINUES.get(_word(after))
    if heads is None:
        return False
    level = _indent(after)
    outer = [ln for ln in lines if _indent(ln) <= level]
    if not outer:
        return False  # the run stays inside the block the suffix continues
    return _indent(outer[-1]) != level or _word(outer[-1]) not in heads


def gate_trimmed(
    text: str,
    check: Callable[[str], Verdict],
    suffix: str = "",
    *,
    skip: int = 0,
    out_of_time: Callable[[], bool] = lambda: False,
    cut_in: str | None = None,
) -> tuple[str, Verdict | None] | None:
    """The longest run of `text`'s leading whole lines the gate does not reject, with
    its verdict; None when it rejects every run (or `text` is blank). For a multi-line
    completion the token budget cut: its last lines may leave a block open.

    `skip` passes over the first runs (already checked by the caller); once
    `out_of_time()` says so, `(text, None)`: whole lines are all there was time for.
    `cut_in` (a language): `text` is a remote answer its token budget cut, shown only
    where nothing is left open at the cut (`open_at_cut`); out of time, nothing."""
    for run in islice(whole_line_runs(text, suffix), skip, None):
        if out_of_time():
            return (text, None) if cut_in is None else None
        if cut_in is not None and open_at_cut(run, suffix, cut_in):
            continue
        info = check(run)
        if info.status != "invalid":
            return run, info
    return None
