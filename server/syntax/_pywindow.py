"""Python: judge a completion by `ast` on the few lines around it, when the file is broken.

In a file already broken near the cursor (a hole under a block header, an unclosed `foo(`
a few lines up, a half-typed line) tree-sitter's error recovery reshapes the old errors
around any insertion, so "did the completion add an error?" answers wrongly both ways:
broken completions hide in the old error region, correct ones look guilty. Python's own
parser, on a window that holds only the completion's lines, does not care what is broken
elsewhere:

- the window: the cursor's line (with what the user typed before the cursor), the
  completion, the rest of its last line and the next line of code ("the zone"), plus more
  lines after it while the input is merely incomplete there (a bracket or a block the
  user's next lines go on to close or fill);
- above it, stubs instead of the user's text: one `if 1:` per enclosing block level
  (taken from the indentation of the headers above), and `pass` (or `if 1:` when it is a
  header) for the line just above. What is broken above the cursor cannot reach the
  window, and the indentation stack is Python's own;
- the verdict: the window parses: valid. An error in the zone: invalid. An error further
  down (in the user's lines the window grew over): not the completion's doing, valid.
  Undecided (None) when the cursor's line continues a statement of the lines above (an
  open bracket or a backslash there), where the window cannot stand on its own.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain

import attrs

_STRINGS = re.compile(rb"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")
_CLAUSE = re.compile(rb"(elif|else|except|finally)\b")
_INCOMPLETE = (
    "was never closed",
    "unexpected EOF",
    "unterminated triple-quoted string",
    "expected 'except' or 'finally' block",  # a `try:` whose handler is further down
)
_INDENTATION = ("indent", "unindent")
_MAX_UP = 400  # lines searched above the cursor for the enclosing headers
MAX_GROW = 40  # lines the window may grow by while the input is incomplete
_MAX_FAR = 5000  # lines searched further up for the headers of a long block
_SIGNATURE = re.compile(rb"(async\s+)?(def|class)\s+\w+\s*[(:]")  # (over several lines)


def _lines_up(data: bytes, pos: int) -> list[tuple[int, int]]:
    """(start, end) of the lines above the line holding `pos`, nearest first, at most
    `_MAX_UP` (one split of the bytes above: a loop of `rfind`s cost 0.3 ms)."""
    end = data.rfind(b"\n", 0, pos)
    if end < 0:
        return []
    lo, step = end, _MAX_UP * 48
    while lo > 0:
        lo = max(0, lo - step)
        step *= 2
        if data.count(b"\n", lo, end) > _MAX_UP:
            break  # (the farthest line read may be partial: it is cut off below)
    lengths = list(map(len, data[lo:end].split(b"\n")[: -_MAX_UP - 1 : -1]))
    ends = [end - c for c in accumulate(map((1).__add__, lengths[:-1]), initial=0)]
    return [(e - n, e) for e, n in zip(ends, lengths, strict=True)]


def _lines_above(data: bytes, ls: int, limit: int) -> Iterator[bytes]:
    """The lines above the line starting at `ls`, nearest first, at most `limit` (lazy:
    most callers stop at the first line of code)."""
    end = ls - 1
    for _ in range(limit):
        if end < 0:
            return
        start = data.rfind(b"\n", 0, end) + 1
        yield data[start:end]
        end = start - 1


def _code(line: bytes) -> bytes:
    """The line without its comment and trailing blanks (strings emptied first)."""
    s = _STRINGS.sub(b'""', line)
    k = s.find(b"#")
    return (s if k < 0 else s[:k]).rstrip()


def _net(line: bytes) -> int:
    s = _code(line)
    return sum(s.count(c) for c in b"([{") - sum(s.count(c) for c in b")]}")


def _indent(line: bytes) -> bytes:
    return line[: len(line) - len(line.lstrip(b" \t"))]


_COMPOUND = re.compile(
    rb"(if|elif|else|for|while|with|try|except|finally|def|class|async)\b"
    # soft keywords: also names (`match = re.match(...)`, `match.group()`, `case(x)`)
    # (a bracket after one starts a pattern only in a header: `case [x, y]:`)
    rb"|(match|case)\b(?!\s*[=.,)\]:]|\s*$)(?!\s*[(\[](?!.*:\s*(#.*)?$))"
)


def _triple_quotes(line: bytes) -> int:
    return line.count(b'"""') + line.count(b"'''")


def _logical_start(data: bytes, ups: list[tuple[int, int]], k: int) -> int:
    """Index (in `ups`) of the first line of the statement that line `k` ends: walk up
    while the lines close more brackets than they open."""
    net = _net(data[ups[k][0] : ups[k][1]])
    while k + 1 < len(ups):
        above = data[ups[k + 1][0] : ups[k + 1][1]]
        if net >= 0 and not _code(above).endswith(b"\\"):
            break
        k += 1
        net += _net(above)
    return k


def _suspicious(data: bytes, ups: list[tuple[int, int]], k: int) -> bool:
    above = data[ups[k][0] : ups[k][1]]
    code = _code(above).strip()
    if code.endswith(b":"):
        code += b" pass"
    if _parse(code) is not None:
        return True
    for m in range(k + 1, min(len(ups), k + MAX_GROW)):
        line = data[ups[m][0] : ups[m][1]]
        c = _code(line)
        if c.strip():
            return len(_indent(line)) < len(_indent(above)) and not c.endswith(b":")
    return False


def _open_brackets(data: bytes, ups: list[tuple[int, int]], k: int) -> list[int]:
    """Indexes of the (at most two) closest lines above, from line `k` up, that open a
    bracket still open at the cursor, looking no further than the enclosing header."""
    net, top, out = 0, 0, []
    ind = len(_indent(data[ups[k][0] : ups[k][1]]))
    for j in range(k, min(len(ups), k + MAX_GROW)):
        line = data[ups[j][0] : ups[j][1]]
        code = _code(line)
        if not code.strip():
            continue
        net += _net(line)
        if net > top:
            top = net
            out.append(j)
            if len(out) == 2:
                break
        if len(_indent(line)) < ind and code.endswith(b":"):
            break
    return out


def _header_stub(line: bytes) -> bytes:
    """The stub for a header: `if 1:`; a `match`'s or a `case`'s is one of its own (a
    `case` stands only in a `match`, and a `match` holds only cases)."""
    body = line.lstrip(b" \t")
    if re.match(rb"match\b", body):
        return b"match 1:"
    if re.match(rb"case\b", body):
        return b"case 1:"
    return b"if 1:"


def _enclosing(data: bytes, ups: list[tuple[int, int]], j: int, cur: int) -> list[bytes]:
    """Stubs for the headers enclosing line `j` (of indentation `cur`), innermost first:
    the lines above less indented than the current level that end in ':' or start with a
    compound statement's keyword (the first line of a header over several lines)."""
    levels: list[bytes] = []
    j += 1
    while cur > 0 and j < len(ups):
        line = data[ups[j][0] : ups[j][1]]
        code = _code(line)
        if (
            code.strip()
            and len(_indent(line)) < cur
            and (code.endswith(b":") or _COMPOUND.match(code.lstrip(b" \t")))
        ):
            h = _logical_start(data, ups, j)  # a header over several lines
            ind_h = _indent(data[ups[h][0] : ups[h][1]])
            if len(ind_h) < cur:
                levels.append(ind_h + _header_stub(data[ups[h][0] : ups[h][1]]))
                cur = len(ind_h)
            j = h
        j += 1
    if cur > 0 and ups and len(ups) >= _MAX_UP:
        # the lines read end inside a long block (a signature with a docstring of hundreds
        # of lines): look further up, by line, for the enclosing headers' indentations
        for line in _lines_above(data, ups[-1][0], _MAX_FAR):
            if cur == 0:
                break
            code = _code(line).lstrip(b" \t")
            if (
                len(_indent(line)) < cur
                and _COMPOUND.match(code)
                and (code.endswith(b":") or _SIGNATURE.match(code))
            ):
                levels.append(_indent(line) + _header_stub(line))
                cur = len(_indent(line))
    if cur > 0:
        levels.append(b"if 1:")  # the outer levels were too far up: one stands for them
    return levels


# the keywords a block header starts with
_KEYWORDS = b"async case class def elif else except finally for match try while with".split()


def _half_keyword(code: bytes) -> bool:
    """Whether the line is the start of a block header's keyword alone (`fina`): a header
    the user is typing, or one cut short."""
    word = code.strip()
    return len(word) >= 2 and word.isalpha() and any(k.startswith(word) for k in _KEYWORDS)


def _contexts(data: bytes, ls: int, nested: bool = False) -> Iterator[tuple[bytes, int]]:
    """Ways to stand for the code above the line starting at `ls`: (stub lines, where the
    window starts). Several when the line above is ambiguous (a header the user left
    without its ':', a line that opens a bracket: the cursor's line continues it, or the
    user left it broken)."""
    ups = _lines_up(data, ls)
    k = 0
    while k < len(ups) and not _code(data[ups[k][0] : ups[k][1]]).strip():
        k += 1
    if k == len(ups):
        yield (b"", ls)
        return
    above = data[ups[k][0] : ups[k][1]]
    code = _code(above)
    j = _logical_start(data, ups, k)
    if _triple_quotes(above) % 2:
        # the line above closes a string over several lines: its statement starts where
        # the string opened
        for m in range(k + 1, min(len(ups), k + _MAX_UP)):
            if _triple_quotes(data[ups[m][0] : ups[m][1]]) % 2:
                j = _logical_start(data, ups, m)
                break
    first = data[ups[j][0] : ups[j][1]]
    ind = _indent(first)
    keyword = bool(_COMPOUND.match(first.lstrip(b" \t"))) or _half_keyword(_code(first))

    def build(ind: bytes, j: int, stub: bytes) -> bytes:
        levels = [ind + stub, *_enclosing(data, ups, j, len(ind))]
        return b"\n".join(reversed(levels)) + b"\n"

    if _net(above) > 0 or code.endswith(b"\\"):
        if not nested:  # the cursor's line continues the statement above
            yield from _contexts(data, ups[j][0], True)
        yield (build(ind, j, b"if 1:" if keyword else b"pass"), ls)
        if not nested and (opens := _open_brackets(data, ups, k)):
            # the line above is the cut middle of a statement that began further up
            # (`% (frame.filenam` under `s += ('...'`): stand for all of it
            top = _logical_start(data, ups, opens[-1])
            if top != j:
                yield (build(_indent(data[ups[top][0] : ups[top][1]]), top, b"pass"), ls)
        return
    header = code.endswith(b":")
    yield (build(ind, j, _header_stub(first) if header else b"pass"), ls)
    if not nested:
        # inside a bracket opened further up (the items of a dict over several lines), or
        # below a bracket the user left open: read it both ways
        for o in _open_brackets(data, ups, k):
            yield from _contexts(data, ups[_logical_start(data, ups, o)][0], True)
    if not header and keyword:
        yield (build(ind, j, b"if 1:"), ls)
    if j != k:
        yield (build(_indent(above), k, b"if 1:" if header else b"pass"), ls)
    # the line above looks broken (it does not parse alone, it is indented as the rest
    # of a statement whose bracket is gone, or a bracket above it is still open at the
    # cursor: a call the user left open): stand for the closest line above that is no
    # deeper than the cursor's line
    cur = len(_indent(data[ls : _line_end(data, ls)]))
    broken = _suspicious(data, ups, k) or (not nested and bool(_open_brackets(data, ups, k)))
    for m in range(k, min(len(ups), k + MAX_GROW) if broken else k):
        line = data[ups[m][0] : ups[m][1]]
        c = _code(line)
        if c.strip() and len(_indent(line)) <= cur:
            if m != j:
                yield (build(_indent(line), m, b"if 1:" if c.endswith(b":") else b"pass"), ls)
            break


def _beside_string(data: bytes, ls: int, at: int) -> list[tuple[bytes, int]]:
    """The lines above the cursor's back to a string's start at `at` are the string's
    prose, not code: a reading that stands for them by the statement the string is part
    of (`usage = \"\"\"` with its closing quotes cut: the user's next `def` is code)."""
    ups = _lines_up(data, ls)
    m = next((i for i, (a, b) in enumerate(ups) if a <= at <= b), None)
    if m is None:
        return []
    j = _logical_start(data, ups, m)
    ind = _indent(data[ups[j][0] : ups[j][1]])
    levels = [ind + b"pass", *_enclosing(data, ups, j, len(ind))]
    return [(b"\n".join(reversed(levels)) + b"\n", ls)]


def _line_start(data: bytes, pos: int) -> int:
    return data.rfind(b"\n", 0, pos) + 1


def _line_end(data: bytes, pos: int) -> int:
    e = data.find(b"\n", pos)
    return len(data) if e < 0 else e


def _next_code_line_end(data: bytes, pos: int) -> int:
    """End of the first line with code that starts at or after `pos` (a line start)."""
    while pos < len(data):
        e = _line_end(data, pos)
        if _code(data[pos:e]).strip():
            return e
        pos = e + 1
    return len(data)


@attrs.frozen
class WindowVerdict:
    """`valid` None: undecided. `where`: byte offset of the error's line (invalid only)."""

    valid: bool | None
    message: str = ""
    where: int = -1
    beyond: bool = False  # the error is in the user's lines after the zone


def readings(data: bytes, ls: int, string_at: int = -1) -> list[tuple[bytes, int]]:
    """All the ways `judge` reads the lines above the line starting at `ls` (stubs, where
    the window starts), in its order. They depend on the text before `ls` and on the
    indentation of the line at `ls` alone: worked out ahead from the text without the
    completion, they hold for any completion after code on that line."""
    found = list(_contexts(data, ls))
    if 0 <= string_at < ls:
        found += _beside_string(data, ls, string_at)
    return found


def judge(
    data: bytes,
    start: int,
    end: int,
    string_at: int = -1,
    ahead: Sequence[tuple[bytes, int]] | None = None,
) -> WindowVerdict:
    """Is the completion at bytes [start, end) of `data` (the text WITH it) valid Python
    where it stands? The best answer over the ways to read the lines above it.
    `string_at`: where a string that holds the cursor starts (a triple-quoted string the
    user left open, running on to the end of the file), if anywhere. `ahead`: those ways
    (`readings` with the same `string_at`), worked out ahead."""
    ls = data.rfind(b"\n", 0, start) + 1
    found: list[WindowVerdict] = []
    contexts: Iterable[tuple[bytes, int]]
    if ahead is not None:
        contexts = ahead
    else:
        contexts = _contexts(data, ls)  # (lazy: most completions pass in the first reading)
        if 0 <= string_at < ls:
            contexts = chain(contexts, _beside_string(data, ls, string_at))
    for n, (stubs, ws) in enumerate(contexts):
        v = _judge_in(data, stubs, ws, ls, start, end)
        # another reading counts only when its window parses outright: its excuses (an
        # error far down, a bracket the user opened) are no evidence
        if v.valid and (n == 0 or not v.message):
            return _unless_swallowing(data, ls, start, end, v)
        found.append(v)
    if not found[0].beyond and any(v.valid is None and v.message for v in found):
        # some reading ran into the end of the file still open: the file is cut short
        # inside the completion's statement, the window has no evidence either way
        return _unless_swallowing(data, ls, start, end, WindowVerdict(None, found[0].message))
    return found[0]


# a line that is surely code, never a docstring's prose: a definition's header, a decorator
_CODE_LINE = re.compile(
    rb"((async\s+)?def\s+\w+\s*\(.*\)\s*(->\s*\S.*)?:"
    rb"|class\s+\w+\s*(\(.*\))?\s*:|@[\w.]+(\(.*\))?)$"
)


def _unless_swallowing(
    data: bytes, ls: int, start: int, end: int, verdict: WindowVerdict
) -> WindowVerdict:
    """`verdict` (valid with an excuse, or undecided), unless the completion ends inside a
    triple-quoted string it opened (a docstring cut short) and the user's lines up to the
    next such quote are code: the string swallows them, and every string below pairs its
    quotes the wrong way round, so Python reports only an unterminated string that moves
    on as the window grows, and never the completion."""
    for q in (b'"""', b"'''"):
        # (quotes inside one-line strings, `'"""'`, are none)
        opened, n, pos = -1, 0, ls
        for line in data[ls:end].split(b"\n"):
            k = _STRINGS.sub(b'""', line).count(q)
            if k % 2:
                opened = pos + max(line.rfind(q), 0)
            n += k
            pos += len(line) + 1
        if not n % 2 or opened < start:
            continue  # balanced, or the user's quote (the completion goes on in its string)
        close = data.find(q, end)
        region = data[end : len(data) if close < 0 else close]
        if any(_CODE_LINE.match(_code(ln).strip()) for ln in region.split(b"\n")[1:]):
            return WindowVerdict(False, "the string opened here swallows the code below it", opened)
    return verdict


def _judge_in(data: bytes, stubs: bytes, ws: int, ls: int, start: int, end: int) -> WindowVerdict:
    first = data[ls : _line_end(data, ls)]
    if ws == ls and _CLAUSE.match(first.lstrip(b" \t")):
        kw = first.lstrip(b" \t")[:2]
        extra = b"try: pass" if kw in (b"ex", b"fi") else b"if 1: pass"
        stubs += _indent(first) + extra + b"\n"
    stubs = _try_stubs(data, ls, end, stubs)
    # the zone: through the rest of the completion's last line and the next line of code
    last_end = _line_end(data, end - 1) if end > start else _line_end(data, start)
    if end > start and data[end - 1 : end] == b"\n":
        last_end = end - 1
    zone_end = _next_code_line_end(data, last_end + 1) if last_end < len(data) else last_end
    after = data[_line_start(data, zone_end) : zone_end]
    if len(_indent(after)) < len(_indent(first)) and _CLAUSE.match(after.lstrip(b" \t")):
        zone_end = last_end  # `finally:` of a statement above the window
    n_stub = stubs.count(b"\n")
    zone_lines = n_stub + data.count(b"\n", ws, zone_end) + 1
    own_lines = n_stub + data.count(b"\n", ws, last_end) + 1  # through the completion's
    # The zone alone first: Python reports a tokenizer error further down (an unmatched
    # ')' that the completion orphaned) before a parser error in the zone.
    window = stubs + data[ws:zone_end]
    err = _parse(window)
    opened = None  # a bracket opened in the zone and not closed there
    if err is None:
        pass
    elif not _incomplete(err, window) and err[1] <= zone_lines:
        return WindowVerdict(False, err[0], _at(data, ws, err[1] - n_stub, err[2]))
    elif "was never closed" in err[0] and n_stub < err[1] <= own_lines:
        opened = err
    hi = _block_end(data, zone_end, len(_indent(first)))
    msg, line, col = "", 0, 0
    tail = b""  # a body for a header the window ends with
    for _ in range(MAX_GROW + 1):
        window = stubs + data[ws:hi] + tail
        err = _parse_to_string(window, zone_lines)
        if err is None:
            return WindowVerdict(True)
        msg, line, col = err
        # A header of the user's below the completion whose body is missing (already
        # before the completion: `def g():` with nothing under it yet) or lies beyond the
        # window: give it one and look again, as for an incomplete window.
        user_header = "expected an indented block" in msg and line > zone_lines
        if not _incomplete(err, window) and not (user_header and not tail):
            break
        if "expected an indented block" in msg and not tail:
            last = window[window.rfind(b"\n") + 1 :]
            ind = _indent(last)
            tail = b"\n" + ind + (b"\t" if b"\t" in ind else b"    ") + b"pass"
            continue
        if hi >= len(data):
            if _incomplete(err, window) and line <= n_stub + data.count(b"\n", ws, ls):
                # a bracket of the user's above the cursor, still open at the end of the file
                return WindowVerdict(None, f"python: {msg} (at the end of the file)")
            break
        hi = _line_end(data, hi + 1)
        tail = b""
    else:
        if line > zone_lines and opened is None:
            return WindowVerdict(True, f"python: {msg} (in the lines after it)")
    if opened is not None and line > zone_lines:
        # the user's lines further down did not close it cleanly: the completion's bracket
        msg, line, col = opened
    where = _at(data, ws, line - n_stub, col)
    if line > own_lines and "was never closed" in msg:
        return WindowVerdict(True, f"python: {msg} (a bracket the user opened after it)")
    if line > own_lines and "unterminated triple-quoted" in msg:
        # a string of the user's after it, longer than the window may grow (a template):
        # the window through its first line, the string empty, must parse
        cut = stubs + data[ws : _at(data, ws, line - n_stub, col)] + b'""'
        if _parse(cut) is None:
            return WindowVerdict(True, f"python: {msg} (a string the user opened after it)")
    if line > zone_lines and not any(m in msg for m in _INDENTATION):
        # in the user's lines after the completion: the caller knows whether they were
        # broken there before. Not an indentation error in the block the window holds:
        # the completion's lines set the indentation those lines are judged by.
        return WindowVerdict(False, msg, where, beyond=True)
    return WindowVerdict(False, msg, where)


def _try_stubs(data: bytes, ls: int, end: int, stubs: bytes) -> bytes:
    """The completion dedents to an `except`/`finally` of a `try:` above the window:
    that level's stub must be a `try:` too (an `if 1:` reads the handler as a syntax
    error). Only where the user's header at that level really is a `try:` (or one of its
    handlers), so a handler under an `if` is still caught."""
    levels = stubs.split(b"\n")
    ups: list[tuple[int, int]] | None = None
    own: set[int] = set()  # indentations of a `try:` the window holds, still open
    for n, ln in enumerate(data[ls:end].split(b"\n")):
        body = ln.lstrip(b" \t")
        if not _code(body).strip():
            continue
        width = len(ln) - len(body)
        own = {w for w in own if w < width or (w == width and _CLAUSE.match(body))}
        if re.match(rb"try\b", body):
            own.add(width)
        if n == 0 or not (body.startswith((b"except", b"finally")) and _CLAUSE.match(body)):
            continue
        if width in own:
            continue  # the handler of a `try:` in the window (the cursor's line, say)
        ind = ln[:width]
        if ind + b"if 1:" not in levels:
            continue
        ups = _lines_up(data, ls) if ups is None else ups
        for a, b in ups:
            code = _code(data[a:b])
            if code.strip() and len(_indent(code)) <= len(ind):
                if _indent(code) == ind and re.match(rb"(try|except)\b", code.lstrip(b" \t")):
                    levels = [ind + b"try:" if x == ind + b"if 1:" else x for x in levels]
                break
    return b"\n".join(levels)


# keywords that start a statement and nothing else: no line inside a bracket starts so
_STATEMENT_ONLY = re.compile(
    rb"(def|class|return|try|while|with|import|raise|pass|break|continue|del|global"
    rb"|nonlocal|assert|elif|except|finally|async\s+def)\b"
)

_HEADER_LINE = re.compile(
    rb"(if|elif|else|for|while|with|try|except|finally|async\s+(for|with))\b.*:$"
)
_DEFINITION = re.compile(rb"(def|class|async\s+def)\s+[A-Za-z_]\w*\s*([(:]|$)")


def _code_above(data: bytes, ls: int) -> bytes | None:
    """The closest line above the line starting at `ls` that holds code, if any."""
    return next((ln for ln in _lines_above(data, ls, MAX_GROW) if _code(ln).strip()), None)


def half_keyword_above(data: bytes, ls: int) -> int:
    """The indentation width of the closest line of code above the line starting at `ls`
    when that line is only the start of a header's keyword (`fina`), else -1."""
    above = _code_above(data, ls)
    if above is not None and _half_keyword(_code(above)):
        return len(_indent(above))
    return -1


def open_brackets_above(data: bytes, ls: int) -> tuple[tuple[int, bool], ...]:
    """The lines above the line starting at `ls` that open a bracket still open there
    (at most two, see `_open_brackets`), each as (the indentation width of its statement's
    first line, whether that line starts a compound statement)."""
    ups = _lines_up(data, ls)
    k = 0
    while k < len(ups) and not _code(data[ups[k][0] : ups[k][1]]).strip():
        k += 1
    if k == len(ups):
        return ()
    out = []
    for o in _open_brackets(data, ups, k):
        a, b = ups[_logical_start(data, ups, o)]
        opener = data[a:b]
        out.append((len(_indent(opener)), bool(_COMPOUND.match(opener.lstrip(b" \t")))))
    return tuple(out)


def stranded(
    data: bytes,
    pos: int,
    line: bytes,
    string_at: Callable[[], int] = lambda: -1,
    *,
    half_keyword: Callable[[], int] | None = None,
    brackets: Callable[[], tuple[tuple[int, bool], ...]] | None = None,
) -> bool:
    """Whether the cursor at `pos` of `data` (the text without the completion) sits in a
    bracket a line above left open (a call the user cut or has not finished), or in a
    string that starts at `string_at()` on a line above (a docstring whose closing quotes
    the user cut), while its line, `line` (with the completion), is a statement that
    cannot be inside it: the user's bracket or string, not the completion, is what is
    broken. The text before the completion may still parse, or break only far below
    (`f(conn.` glued to an argument line below the hole; a docstring running on to the
    next one's quotes), so the file need not look broken near the cursor.

    A statement: a statement-only keyword, or a block header (`if x:`), which no line
    inside a bracket starts with. It cannot be inside the bracket when it is no deeper
    than the bracket's line, or deeper when that line is a block header (a signature cut
    in its parameters, the body below).

    Also stranded: any line deeper than the line above it when that line is only the start
    of a header's keyword (`fina`, a `finally:` cut short), which parses as a name.

    `half_keyword` and `brackets` give `half_keyword_above` and `open_brackets_above` of
    the cursor's line (a caller's cached copies: they depend on the text alone)."""
    body = line.lstrip(b" \t")
    first = body.split(b"\n", 1)[0]
    width = len(line) - len(body)
    ls = data.rfind(b"\n", 0, pos) + 1
    half = half_keyword() if half_keyword is not None else half_keyword_above(data, ls)
    if 0 <= half < width:
        return True
    if not (_STATEMENT_ONLY.match(first) or _HEADER_LINE.match(_code(first))):
        return False
    at = string_at()  # (a walk of the tree: only once a statement's keyword matched)
    if 0 <= at < ls:
        # a string's lines are prose, SQL, anything: only a definition, shallower than
        # the string's own line, is surely code
        opened = data[data.rfind(b"\n", 0, at) + 1 : at + 1]
        return bool(_DEFINITION.match(first)) and len(_indent(opened)) > width
    found = brackets() if brackets is not None else open_brackets_above(data, ls)
    return any(indent >= width or compound for indent, compound in found)


def indentation_broken(data: bytes, pos: int) -> bool:
    """Whether the indentation is broken at `pos` (in the text without the completion),
    which tree-sitter-python does not report: the next line of code is deeper than the
    one above it that is no header, or a header's next line is not deeper. Runs on every
    Python check: plain byte tests first, the comment/bracket-aware ones only on doubt."""
    ls = data.rfind(b"\n", 0, pos) + 1
    below = b""
    e = ls
    n = len(data)
    while e < n:
        le = data.find(b"\n", e)
        le = n if le < 0 else le
        below = data[e:le]
        e = le + 1
        s = below.lstrip()
        if s and not s.startswith(b"#"):
            break
    else:
        return False
    for above in _lines_above(data, ls, MAX_GROW):
        s = above.lstrip()
        if not s or s.startswith(b"#"):
            continue
        deeper = len(below) - len(below.lstrip(b" \t")) > len(above) - len(s)
        if deeper == above.rstrip().endswith(b":"):
            return False
        if not _code(above).strip() or _net(above) != 0:
            return False  # in a string or a statement over several lines: no telling
        return deeper != _code(above).endswith(b":")
    return False


def _incomplete(err: tuple[str, int, int], window: bytes) -> bool:
    """More input might fix it: the error is on the window's last line or at its end. A
    `try:` without a handler is not, where Python points at the start of a line of code
    (one shallower than the handler would be): only at the end of the input is the
    handler maybe further down."""
    msg, line, col = err
    if "expected 'except' or 'finally'" in msg:
        text = _nth_line(window, line)
        return not (text.strip() and col == len(_indent(text)))
    return any(m in msg for m in _INCOMPLETE) or line > window.count(b"\n")


def _nth_line(text: bytes, n: int) -> bytes:
    """The n-th (1-based) line of `text`."""
    lines = text.split(b"\n", n)
    return lines[n - 1] if 0 < n <= len(lines) else b""


def _parse_to_string(window: bytes, after: int) -> tuple[str, int, int] | None:
    """`_parse`, but a triple-quoted string that a line after line `after` opens and the
    window does not close (it closes further down, or the user's quotes pair wrongly) is
    no excuse for what comes before it: Python's tokenizer reports it in preference to a
    parser error above it. The window up to the string (emptied) is read first."""
    err = _parse(window)
    if err is None or "unterminated triple-quoted" not in err[0] or err[1] <= after:
        return err
    cut = window[: _at(window, 0, err[1], err[2])] + b'""'
    before = _parse(cut)
    if before is not None and not _incomplete(before, cut):
        return before
    return err


def _line_at(data: bytes, ws: int, n: int) -> int:
    """Byte offset of the start of the n-th (1-based) line from the one at `ws`."""
    where = ws
    for _ in range(max(0, n - 1)):
        where = _line_end(data, where) + 1
    return min(where, len(data))


def _at(data: bytes, ws: int, n: int, col: int) -> int:
    """Byte offset of column `col` of the n-th (1-based) line from the one at `ws`."""
    start = _line_at(data, ws, n)
    return min(start + col, _line_end(data, start)) if n >= 1 else start


def _block_end(data: bytes, pos: int, base: int) -> int:
    """From the end of a line, through the lines indented deeper than `base` and the first
    line of code that is not (where a wrong indentation above shows)."""
    for _ in range(MAX_GROW):
        if pos >= len(data):
            break
        e = _line_end(data, pos + 1)
        line = data[pos + 1 : e]
        pos = e
        if _code(line).strip() and len(_indent(line)) <= base:
            if len(_indent(line)) < base and _CLAUSE.match(line.lstrip(b" \t")):
                return pos - len(line) - 1  # `else:` of a statement above the window
            break
    return pos


def _parse(window: bytes) -> tuple[str, int, int] | None:
    """(message, 1-based line, 0-based column) of the first syntax error, None when
    `window` parses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(window, "<window>", "exec", 0x400, dont_inherit=True)  # PyCF_ONLY_AST
    except SyntaxError as e:
        return str(e.msg), e.lineno or 0, max(0, (e.offset or 1) - 1)
    except Exception:  # NUL bytes (ValueError), deep nesting (RecursionError, MemoryError)
        return "unparsable", 0, 0
    return None
