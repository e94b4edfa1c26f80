"""Java, C, C++: judge a completion by a parse of the statement it belongs to, when the file
is broken near the cursor.

The Python window judge's twin for brace languages (see _pywindow). In a file already broken
near the cursor (a block header deleted, a call left open above, a half-typed line)
tree-sitter's recovery reshapes the old errors around any insertion, so the differential
answers wrongly both ways. A window that holds only the completion's statement does not
care what is broken elsewhere:

- the window: the cursor's line (with what the user typed before the cursor), the
  completion, the rest of its line, then the user's lines that belong to the same statement:
  deeper ones, and at the same indentation those that continue it (`}`, `else`, `catch`, an
  operator) or follow a line that did not end it. It ends before the next statement at the
  statement's indentation, before a line less indented, and before a `}` that would close a
  level opened above the window (unless the file has a `}` too many: the hole's);
- above it, stubs instead of the user's text: one `{` per enclosing level, read from the
  indentation of the lines above (`switch (0) {` for a switch; `if (1) {`, `try {`, `do {`
  for a level the window itself closes), inside a stub method. What is broken above the
  cursor (an unclosed `foo(`, a cut line) cannot reach the window. A level whose `{` is no
  less indented than its body is found by its brace and read both ways;
- other readings where the lines above are ambiguous: the nearest less indented line does
  not end in `{` (a header cut in half, or a statement the cursor's line continues), the
  line just above does not end its statement, the statement began further up: the window
  also starts there;
- the verdict: a window parses in some reading: valid; in none: invalid (an unbalanced brace
  shows at the window's end). Undecided (None, the caller's differential decides) where no
  window stands on its own (the cursor among class members or in an initializer, code not
  indented, too far to scan), where the file ends inside the statement, where the user's
  lines in the window were broken already and do not parse alone, and where indentation and
  braces disagree (a body as deep as its header).

The parsers are the languages' own checks where they are cheap (Java: javalang, as the
paper), tree-sitter for C and C++ (the compiler needs the whole file; the file's
statement-like macros rewritten when the window fails as written, see _cmacros; statement
keywords that tree-sitter reads as identifiers rejected).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs
import tree_sitter

from . import _cmacros, _cnames
from ._compilers import check_java
from ._treesitter import collect_sites, parse
from .languages import parser_for

_MAX_UP = 1500  # lines searched above the cursor for the enclosing levels
_MAX_DOWN = 400  # lines the window may reach below the completion
_MESSY_LINES = 150  # lines above the window read for the file's indentation style
_MAX_STATEMENT = 60  # lines searched above the cursor for the start of its statement
_TAB = 4

_STRINGS = re.compile(rb"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")
_LINE_COMMENT = re.compile(rb"//.*$|/\*.*?\*/")
_MEMBER = re.compile(
    rb"^(?:[\w@]+(?:\([^)]*\))?\s+)*(?:class|struct|interface|enum|namespace|union|record|"
    rb"@interface)\b|^extern\s+\"|^template\s*<.*>\s*(?:class|struct)\b"
)
# a Java method or constructor header: nothing but a class body can enclose it, so the
# levels above it need no reading (the class's own line may be thousands of lines up)
_JAVA_METHOD = re.compile(
    rb"^(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:(?:public|protected|private|static|final|abstract|"
    rb"synchronized|native|strictfp|default)\s+)*(?:<[^()]*>\s*)?"
    rb"(?:[\w.$]+(?:<[^()]*>)?(?:\[\])*\s+)?[\w$]+\s*\([^;{}]*\)\s*"
    rb"(?:throws\s+[\w.$<>, ]+)?\{$"
)
_JAVA_STATEMENT = re.compile(
    rb"^(?:if|else|for|while|switch|catch|try|do|synchronized|return|throw|new|case|yield|"
    rb"assert)\b"
)
_ANON_CLASS = re.compile(rb"\bnew\s+[\w.<>, ?]+\s*\([^;]*\)\s*\{$")
_INIT = re.compile(rb"(?:=|\breturn)\s*\{$|\bnew\s+[\w.<>]+\s*(?:\[[^\]]*\]\s*)+\{$")
_SWITCH = re.compile(rb"^(?:\}\s*)?switch\b")
_LABEL = re.compile(rb"^(?:case\b.*|default\s*|[A-Za-z_]\w*\s*):$")
# a line at the cursor's indentation that carries on the statement before it
_GOES_ON = re.compile(rb"^(?:[})\].?:]|else\b|catch\b|finally\b|&&|\|\||[-+*/%^|&<>=!]=?)")
_ENDS = (b";", b"{", b"}", b":")
_KEYWORD = re.compile(rb"(?:^|\})\s*(try|do)\b")
_CONTROL = re.compile(rb"(?:\}\s*)?(?:if|else|for|while|switch|do)\b")


@attrs.frozen
class WindowVerdict:
    """`valid` None: undecided. `where`: byte offset of the error (invalid only); `exact`:
    the parser's error is on the text itself, not on a stub around it."""

    valid: bool | None
    message: str = ""
    where: int = -1
    span: tuple[int, int] = (0, 0)  # bytes of the text the (first) window holds
    exact: bool = False


# (window, the completion's bytes in it or None) -> (offset, message) of an error
Parse = Callable[[bytes, tuple[int, int] | None], tuple[int, str] | None]


def _width(line: bytes) -> int:
    w = 0
    for c in line:
        if c == 0x20:
            w += 1
        elif c == 0x09:
            w += _TAB - w % _TAB
        else:
            break
    return w


def _code(line: bytes) -> bytes:
    """The line without comments, string contents and surrounding blanks."""
    s = _STRINGS.sub(b'""', line)
    return _LINE_COMMENT.sub(b"", s).strip()


def _skip(code: bytes) -> bool:
    """Lines that are no code for the window's structure: blank, comments, directives."""
    return (
        not code
        or code.startswith((b"#", b"*", b"/*", b"@"))
        or code.endswith(b"*/")
        or bool(_LABEL.match(code) and not code.startswith((b"case", b"default")))
    )


def _line_end(data: bytes, pos: int) -> int:
    e = data.find(b"\n", pos)
    return len(data) if e < 0 else e


@attrs.frozen
class _Level:
    kind: str  # "block", "switch", "open" (no `{`: a cut header or a statement going on)
    start: int  # byte offset of the level's line
    width: int  # its indentation
    keyword: bytes = b""  # `try`, `do`: the stub a window that closes it needs
    flat: bool = False  # found by its brace, at least as deep as the lines it holds


def _levels(data: bytes, ls: int, ci: int, java: bool = False) -> tuple[list[_Level], int] | None:
    """The enclosing levels of a line at indentation `ci` starting at byte `ls`, innermost
    first, and the start of the code line just above it at the same indentation (-1 when
    none or it ends its statement). None when no window stands on its own there. In Java,
    the levels end at a method's header."""
    levels: list[_Level] = []
    cur = ci
    same = -2  # -2: not seen yet
    # braces closed minus opened by the lines between here and the last level (a line that
    # starts with `}` closes a block of its own indentation: the lead stub stands for it)
    bal = 1 if _code(data[ls : _line_end(data, ls)]).startswith(b"}") else 0
    end = ls - 1
    for _ in range(_MAX_UP):
        if end < 0:
            break
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end]
        end = start - 1
        code = _code(line)
        if _skip(code) or _LABEL.match(code):
            continue
        w = _width(line)
        if w >= cur:
            if same == -2 and w == cur and not levels:
                same = -1 if code.endswith(_ENDS) or code.startswith(b"case") else start
            bal += code.count(b"}") - code.count(b"{")
            if bal < 0 and code.endswith(b"{") and not _INIT.search(code):
                # a block the lines below do not close, opened no less indented than they
                # are (`LOOP(i,0,n)` / `{` / a body at the brace's indentation)
                kw = _KEYWORD.search(code)
                kind = "switch" if _SWITCH.match(code) else "block"
                levels.append(_Level(kind, start, w, kw.group(1) if kw else b"", flat=True))
                bal = 0
            continue
        if same == -2:
            same = -1
        bal = 0
        if code.endswith(b"{"):
            if _MEMBER.match(code) or _ANON_CLASS.search(code):
                return (levels, same) if levels else None
            if _INIT.search(code):
                return None
            kw = _KEYWORD.search(code)
            kind = "switch" if _SWITCH.match(code) else "block"
            levels.append(_Level(kind, start, w, kw.group(1) if kw else b""))
            if java and _JAVA_METHOD.match(code) and not _JAVA_STATEMENT.match(code):
                return levels, max(same, -1)
        else:
            levels.append(_Level("open", start, w))
        cur = w
        if w == 0:
            return levels, max(same, -1)
    if end < 0 and levels:
        return levels, max(same, -1)
    return None


def _statement_start(data: bytes, ls: int) -> int:
    """Start of the line that begins the statement the line at `ls` belongs to, when that is
    an earlier line (the lines between do not end in `;`, `{`, `}` or `:`), else -1."""
    found = -1
    end = ls - 1
    for _ in range(_MAX_STATEMENT):
        if end < 0:
            return -1
        start = data.rfind(b"\n", 0, end) + 1
        code = _code(data[start:end])
        end = start - 1
        if _skip(code):
            continue
        if code.endswith(_ENDS):
            return found
        found = start
    return -1


def _first_code(data: bytes, pos: int, limit: int) -> int:
    """Byte offset of the first line from `pos` (a line start) with code before `limit`."""
    while pos <= limit:
        e = _line_end(data, pos)
        if _code(data[pos:e]) and not _code(data[pos:e]).startswith((b"//", b"/*")):
            return pos
        pos = e + 1
    return -1


def _window_end(
    data: bytes, after: int, ci: int, last: bytes, depth: int | None, inner: int = 0
) -> int:
    """End (byte offset) of the user's lines from `after` (a line start) that belong to the
    statement at indentation `ci` whose last code line so far is `last`; -1: too far.
    `depth`: braces open so far; a `}` that would close a brace opened before the window
    ends it (None: the file has a `}` too many, which may be this one). `inner`: braces the
    window's own lines opened and left open: a line at `ci` inside them is a block's body
    written at its header's indentation (competitive code), and still the window's."""
    pos = after
    end = after - 1 if after > 0 else 0
    closed = False  # the line before closed the window's last open block at `ci`
    for _ in range(_MAX_DOWN):
        if pos >= len(data):
            return len(data)
        e = _line_end(data, pos)
        line = data[pos:e]
        code = _code(line)
        if _skip(code):  # (a goto label sits at column 0 inside its block)
            pos = e + 1
            continue
        w = _width(line)
        if w < ci or (w == ci and last.endswith(_ENDS) and not _GOES_ON.match(code) and inner <= 0):
            return end
        if code:
            if closed and not _GOES_ON.match(code):
                # the window's blocks all closed on a `}` line at `ci`: the statement is
                # whole, and a deeper line after it is the next one, indented carelessly
                return end
            closed = (
                w == ci and code.startswith(b"}") and inner > 0 and not open_braces(code, inner)
            )
        if depth is not None:
            if code.startswith(b"}") and depth <= 0:
                return end
            depth += brace_depth(line)
        inner = open_braces(code, inner)
        last = code
        end = e
        pos = e + 1
    return -1


_OPENERS = {
    b"else": b"if (1) {",
    b"catch": b"try {",
    b"finally": b"try {",
    b"while": b"do {",
}


def _lead_stub(code: bytes) -> bytes:
    """A stub statement the window's first line continues (`} else {` needs its `if`)."""
    rest = code
    closed = rest.startswith(b"}")
    if closed:
        rest = rest[1:].lstrip()
    for kw, opener in _OPENERS.items():
        if re.match(kw + rb"\b", rest):
            if closed:
                return opener
            if kw != b"while":  # a `while` of its own starts a loop
                return opener + b"}"
    return b"{" if closed else b""


def judge(
    data: bytes,
    start: int,
    end: int,
    java: bool,
    parse: Parse,
    surplus: bool = False,
    user_broken: Callable[[int, int], bool] | None = None,
) -> WindowVerdict:
    """Is the completion at bytes [start, end) of `data` (the text WITH it) valid where it
    stands? The best answer over the readings of the lines above it. `surplus`: the text
    without the completion closes more braces than it opens (a block header deleted).
    `user_broken(lo, hi)`: whether the user's lines in bytes [lo, hi) of `data` had an
    error (other than a brace) before the completion."""
    ls = data.rfind(b"\n", 0, start) + 1
    first = _first_code(data, ls, max(end - 1, start))
    if first < 0:
        return WindowVerdict(None)
    fe = _line_end(data, first)
    ci = _width(data[first:fe])
    found = _levels(data, first, ci, java)
    if found is None:
        return WindowVerdict(None)
    levels, same = found
    if not levels:
        return WindowVerdict(None)
    # the completion's lines, the rest of its last line: always in the window
    zone_end = _line_end(data, max(end - 1, start))
    if end > start and data[end - 1 : end] == b"\n":
        zone_end = end - 1
    readings: list[tuple[int, list[_Level]]] = [(first, levels)]
    if levels[0].kind == "open":  # a cut header, or the cursor's line goes on with it
        up = _levels(data, levels[0].start, _width(data[levels[0].start :]), java)
        if up is not None and up[0]:
            readings.append((levels[0].start, up[0]))
    if same >= 0:  # the line above at the same indentation does not end its statement
        readings.append((same, levels))
    stmt = _statement_start(data, first)
    if stmt >= 0 and all(ws != stmt for ws, _ in readings):
        # the cursor's line goes on with a statement begun further up (an argument list
        # over several lines): the window starts where that statement does
        up = _levels(data, stmt, _width(data[stmt : _line_end(data, stmt)]), java)
        if up is not None and up[0]:
            readings.append((stmt, up[0]))
    out: WindowVerdict | None = None
    unsure = False
    for k, (ws, lv) in enumerate(readings):
        try:
            v = _judge_in(data, ws, (start, end, zone_end), lv, java, parse, surplus)
        except WindowTimeout:
            return WindowVerdict(None)
        if v.valid is None or (not v.valid and ws < first and v.where < start):
            continue  # (an error in the user's lines above, which this reading holds)
        if v.valid:
            return v if k == 0 or out is None else attrs.evolve(out, valid=True)
        # a window that holds user lines broken already (below the completion) proves
        # nothing against it
        unsure = unsure or (
            user_broken is not None
            and user_broken(zone_end, v.span[1])
            and not _parses_alone(data[zone_end + 1 : v.span[1]], java, parse)
        )
        if out is None:
            out = v
    if out is None or unsure:
        return WindowVerdict(None, span=out.span if out else (0, 0))
    return out


def _judge_in(
    data: bytes,
    ws: int,
    span: tuple[int, int, int],
    levels: list[_Level],
    java: bool,
    parse: Parse,
    surplus: bool,
) -> WindowVerdict:
    start, end, zone_end = span
    # The statement's indentation: the least of its lines so far (a completion may close
    # the blocks it sits in: `} else if (b) {` one level out).
    lines = data[ws:zone_end].split(b"\n")
    head = data[_line_start(data, start) : start]
    rest = data[end:zone_end] if end < zone_end else b""
    frag = data[_line_start(data, end) : end]
    blank_head = head if not head.strip() else b""
    if len(lines) > 1 and frag and not frag.strip():
        # the completion's last line is only blanks: the user's line after it keeps the
        # indentation it had (the blanks before the cursor, if any, and its own)
        lines[-1] = blank_head + rest
    elif _code(rest) and (not head.strip() or (len(lines) > 1 and rest[:1] in b" \t")):
        # the user's text after the completion was a line of its own (the cursor at its
        # start or after its indentation, or it starts with its own indentation): it keeps
        # the indentation it had
        lines[-1] = frag
        lines.append(blank_head + rest)
    ci = min(
        (_width(ln) for ln in lines if _code(ln)),
        default=_width(data[ws : _line_end(data, ws)]),
    )
    if ci == 0 and not _closes_function(lines, levels):
        return WindowVerdict(None)  # code in a block yet not indented: no evidence
    first = _code(data[ws : _line_end(data, ws)])
    last = _code(data[_line_start(data, zone_end) : zone_end])
    # A flat level's `}` may be the window's or further down: both readings.
    flats = (False, True) if any(lv.flat for lv in levels) else (False,)
    for flat_in in flats:
        top, tail, depth = _frame(levels, ci, java, flat_in, _lead_stub(first))
        depth += brace_depth(data[ws:zone_end])
        if not flat_in:
            over = -depth  # > 0: the window closes more braces than the reading opened
        we = zone_end
        if zone_end < len(data):
            we = _window_end(
                data,
                zone_end + 1,
                ci,
                last,
                depth if not surplus else None,
                open_braces(_code_of(data[ws:zone_end])),
            )
        if we < 0:
            return WindowVerdict(None)
        we = max(we, zone_end)
        err = parse(top + data[ws:we] + tail, _focus(top, ws, start, end))
        if err is None:
            if not flat_in and _leaves_open(data, we, ci, levels, data[start:end]):
                return WindowVerdict(False, "expected '}'", we, span=(ws, we), exact=True)
            return WindowVerdict(True, span=(ws, we))
        if not flat_in:
            first_try = (top, tail, we, err)
    top, tail, we, err = first_try
    lead = _lead_stub(first)
    # Readings with the innermost levels the window's lines close read as entered:
    forces = []
    if over > 0 and _outside(data, we, levels, ci, over):
        # a line that closes more blocks than its indentation says (the completion's `}`
        # glued to the user's: `    }}`), when the user's next line is outside them too
        forces.append(over)
    shut = -(brace_depth(data[ws:we]) + (1 if lead.endswith(b"{") else 0))
    if 0 < shut <= len(levels) and all(_column_control(data, lv) for lv in levels[:shut]):
        # levels whose headers sit at the function's column (`while (t--) {` there, its
        # body and `}` indented): the indentation cannot say the `}` is theirs
        forces.append(shut)
    for force in dict.fromkeys(forces):
        top2, tail2, _ = _frame(levels, ci, java, False, lead, force=force)
        if parse(top2 + data[ws:we] + tail2, _focus(top2, ws, start, end)) is None:
            return WindowVerdict(True, span=(ws, we))
    # The lines may not follow their braces (a body as deep as its header, its `}` one
    # level out, a block's lines going on at its header's indentation): when the window
    # parses once it runs on to where its braces close, and a line on the way sits inside
    # an open block no deeper than the line that opened it, indentation and braces
    # disagree, and the window cannot tell who is right.
    depth = brace_depth(data[ws:we]) + (1 if lead.endswith(b"{") else 0)
    if depth > 0:
        pos = we + 1
        for _ in range(_MAX_DOWN):
            if pos >= len(data):
                break
            e = _line_end(data, pos)
            depth += brace_depth(data[pos:e])
            pos = e + 1
            if depth <= 0:
                text = b"\n".join(lines) + data[zone_end:e]
                flat = _flat_body(b"\n".join(lines) + data[zone_end:we])
                # lines that go on at their block's header's indentation: the file's own
                # style (its lines above do so too), or a closer the completion dropped
                messy = (
                    not java
                    and not flat
                    and _indent_disagrees(text)
                    and _indent_disagrees(data[_lines_up(data, ws, _MESSY_LINES) : ws])
                )
                if flat or messy:
                    # (the user's closers may end levels the indentation hid, a `}}}`
                    # under a `while` at the function's own column: as many more)
                    for more in range(1 + max(0, min(-depth, 3))):
                        top2 = top.replace(b"() ", b"() " + b"{ " * more, 1)
                        if parse(top2 + data[ws:e] + tail, _focus(top2, ws, start, end)) is None:
                            return WindowVerdict(True if messy else None, span=(ws, e))
                break
    if we >= len(data.rstrip()):
        # the user's lines never close the statement (a file cut short): no evidence
        return WindowVerdict(None, span=(ws, we))
    at, message = err
    where = min(max(ws + at - len(top), ws), we)
    exact = len(top) <= at < len(top) + (we - ws)
    return WindowVerdict(False, message, where, span=(ws, we), exact=exact)


_CLOSER = re.compile(rb"^\}[\s};]*$")


def _column_control(data: bytes, lv: _Level) -> bool:
    """Whether the level is a control statement's block whose header sits at column 0."""
    return lv.width == 0 and bool(_CONTROL.match(_code(data[lv.start : _line_end(data, lv.start)])))


def _closes_function(lines: list[bytes], levels: list[_Level]) -> bool:
    """Whether the window's only unindented code is `}` lines that close the function it
    sits in (a completion that finishes the function), its other lines indented."""
    if not levels or levels[-1].width != 0:
        return False
    flush = [c for ln in lines if (c := _code(ln)) and _width(ln) == 0]
    return (
        bool(flush)
        and len(flush) < sum(1 for ln in lines if _code(ln))
        and all(_CLOSER.match(c) for c in flush)
    )


def _next_code(data: bytes, pos: int) -> bytes | None:
    """The first line from `pos` (a line start) that is code for the window's structure, or
    None at the end of the text."""
    while pos < len(data):
        e = _line_end(data, pos)
        if not _skip(_code(data[pos:e])):
            return data[pos:e]
        pos = e + 1
    return None


def _outside(data: bytes, we: int, levels: list[_Level], ci: int, n: int) -> bool:
    """Whether the user's next code line after byte `we` (or the end of the text) is no
    deeper than the outermost of the `n` innermost levels the window's reading left open."""
    open_levels = [lv for lv in levels if not (lv.width >= ci and not lv.flat)]
    if len(open_levels) < n:
        return False
    line = _next_code(data, we + 1)
    return line is None or _width(line) <= open_levels[n - 1].width


def _leaves_open(data: bytes, we: int, ci: int, levels: list[_Level], completion: bytes) -> bool:
    """Whether a multi-line completion leaves the block it sits in open where the user's
    next line is no deeper than that block's header, in a text (`data`, with the
    completion) that opens more braces than it closes: the hole's `}` (the error at the
    cursor the text had without it) is still missing. A single line may leave it: the
    user may be typing the block's body."""
    if sum(1 for ln in completion.split(b"\n") if ln.strip()) < 2:
        return False
    inner = levels[0]
    if inner.kind != "block" or inner.flat or inner.width >= ci:
        return False  # no `{` above it, body at the header's indentation, or closed in it
    line = _next_code(data, we + 1)
    # (and the text short of a `}`: a file indented carelessly has lines at its headers'
    # indentation inside their blocks)
    return (
        line is not None
        and _width(line) <= inner.width
        and not _code(line).startswith((b"}", b")", b"case", b"default"))
        and brace_depth(data) > 0
    )


def _focus(top: bytes, ws: int, start: int, end: int) -> tuple[int, int]:
    """The completion's bytes [start, end) of the text in a window `top` + text[ws:...]."""
    return len(top) + start - ws, len(top) + end - ws


_ENTERED = {b"try": b"try {", b"do": b"do {"}


def _parses_alone(text: bytes, java: bool, parse: Parse) -> bool:
    """Whether the user's lines `text` parse as statements on their own, braces balanced
    by stubs around them (a `}` too many is the window's business, not theirs)."""
    depth, low = 0, 0
    openers: list[bytes] = []  # for each `}` that closes what opened above the lines
    for line in text.split(b"\n"):
        code = _code(line)
        for i, c in enumerate(code):
            depth += (c == 0x7B) - (c == 0x7D)
            if depth < low:
                low = depth
                openers.append(_lead_stub(code[i:]))
    top = (b"class __W {\nvoid __m() {" if java else b"void __f() {") + b" ".join(reversed(openers))
    top += b"\n"
    tail = b"\n" + b"}" * (depth - low + 1) + (b"\n}" if java else b"") + b"\n"
    # an `else` whose `if` the completion was to bring: a stub `if` before each keeps any
    # `else` well-formed (`if (x) a; if (1) {} else b;` parses as the original did)
    text = _ELSE_LINE.sub(rb"\1if (1) {} \2", text)
    return parse(top + text + tail, None) is None


_ELSE_LINE = re.compile(rb"(?m)^([ \t]*)(else\b)")


def _frame(
    levels: list[_Level], ci: int, java: bool, flat_in: bool, lead: bytes, force: int = 0
) -> tuple[bytes, bytes, int]:
    """The stub text before and after a window whose statement sits at indentation `ci`,
    and the braces it leaves open at the window's start. A level at least as indented as
    the statement is closed by a line of the window itself ("entered"); `flat_in`: so are
    the levels found by their brace alone; `force`: so are that many more, innermost
    first."""
    stubs: list[bytes] = []
    closers = 0
    forced: set[int] = set()
    for lv in levels:
        if len(forced) >= force:
            break
        if not (lv.width >= ci and (flat_in or not lv.flat)):
            forced.add(id(lv))
    for lv in reversed(levels):
        entered = (lv.width >= ci and (flat_in or not lv.flat)) or id(lv) in forced
        if lv.kind == "switch":
            stubs.append(b"switch (0) {" + (b" case 0:" if java else b""))
        elif entered and lv is not levels[-1]:  # (the outermost: the stub method's body)
            stubs.append(_ENTERED.get(lv.keyword, b"if (1) {"))
        else:
            stubs.append(b"{")
        closers += not entered
    top = (b"class __W {\nvoid __m() " if java else b"void __f() ") + b" ".join(stubs)
    top += (b" " + lead if lead else b"") + b"\n"
    tail = b"\n" + b"}" * closers + (b"\n}" if java else b"") + b"\n"
    return top, tail, lead.endswith(b"{") + len(stubs) - closers


def _flat_body(text: bytes) -> bool:
    """Whether a line of `text` that opens a block is followed by a line no deeper."""
    prev: bytes | None = None
    for line in text.split(b"\n"):
        code = _code(line)
        if not code:
            continue
        if (
            prev is not None
            and _code(prev).endswith(b"{")
            and not code.startswith(b"}")
            and _width(line) <= _width(prev)
        ):
            return True
        prev = line
    return False


def _lines_up(data: bytes, pos: int, n: int) -> int:
    """The start of the line `n` lines above the one at `pos`."""
    for _ in range(n):
        if pos <= 0:
            return 0
        pos = data.rfind(b"\n", 0, pos - 1) + 1
    return pos


def _indent_disagrees(text: bytes) -> bool:
    """Whether a line of `text` inside a block its lines opened is no deeper than the line
    that opened it (and does not close it)."""
    opened: list[int] = []  # the width of the line that opened each block still open
    for line in text.split(b"\n"):
        code = _code(line)
        if not code:
            continue
        width = _width(line)
        if opened and width <= opened[-1] and not code.startswith(b"}"):
            return True
        for c in code:
            if c == 0x7B:
                opened.append(width)
            elif c == 0x7D and opened:
                opened.pop()
    return False


def open_braces(code: bytes, opened: int = 0) -> int:
    """Braces `code` leaves open after `opened` were: a `}` with none open closes nothing."""
    for c in code:
        if c == 0x7B:
            opened += 1
        elif c == 0x7D and opened:
            opened -= 1
    return opened


def _code_of(text: bytes) -> bytes:
    return b"\n".join(_code(line) for line in text.split(b"\n"))


def brace_depth(text: bytes) -> int:
    """Braces opened minus closed in `text` (comments and strings left out)."""
    d = 0
    for line in text.split(b"\n"):
        code = _code(line)
        d += code.count(b"{") - code.count(b"}")
    return d


def _line_start(data: bytes, pos: int) -> int:
    return data.rfind(b"\n", 0, pos) + 1


class WindowTimeout(Exception):
    """The check's deadline passed while a window was parsed."""


def java_parser(deadline: float | None) -> Parse:
    """javalang on the window (the paper's Java check): (byte offset, message) of its error."""

    def run(window: bytes, focus: tuple[int, int] | None) -> tuple[int, str] | None:
        text = window.decode("utf-8", "replace")
        res = check_java(text, deadline)
        if res.timed_out:
            raise WindowTimeout
        if res.ok:
            return None
        d = res.diagnostics[0] if res.diagnostics else None
        at = len(text) if d is None or d.offset is None else d.offset
        return len(text[:at].encode("utf-8")), (d.message if d else "syntax error")

    return run


def tree_sitter_parser(
    language: str,
    macros: dict[bytes, str],
    deadline: float | None,
    is_value: Callable[[bytes], bool] | None = None,
) -> Parse:
    """tree-sitter on the window, the file's statement-like macros rewritten first; then
    the names it misread around the completion (`_cnames`; `is_value`: whether the file
    uses a name as a value)."""

    def once(window: bytes, focus: tuple[int, int] | None) -> tuple[int, str] | None:
        tree = parse(parser_for(language), window, None, deadline)
        if tree is None:
            raise WindowTimeout
        sites = collect_sites(tree, window)
        if sites:
            return sites[0].where, sites[0].message()
        err = _keyword_identifier(tree, window)
        if err is None and focus is not None:
            err = _cnames.misread(tree, window, focus, is_value)
        return err

    def run(window: bytes, focus: tuple[int, int] | None) -> tuple[int, str] | None:
        err = once(window, focus)
        if err is None or not macros:
            return err
        # the macros rewritten only when asked: the guess of which are statements can err
        # (`#define max(x,y) ((x)>(y))?(x):(y);` is used as an expression)
        return err if once(_cmacros.neutralize(window, macros), focus) is not None else None

    return run


# tree-sitter-c/cpp read a statement keyword where an expression ends (`x |= break;`) as a
# plain identifier, without an error; the compilers reject it.
_KEYWORDS = frozenset(
    b"break continue return if else for while do switch case default goto".split()
)


# A keyword right after an operator, an opening bracket or a word (`c return;` reads as a
# declaration): only then can it be read so (a cheap filter before walking the tree).
_AFTER_OPERATOR = re.compile(
    rb"(?:[-+*/%&|^<>=!~?,(\[]\s*|\w\s+)(?:" + b"|".join(sorted(_KEYWORDS)) + rb")\b"
)


def _keyword_identifier(tree: tree_sitter.Tree, window: bytes) -> tuple[int, str] | None:
    if not _AFTER_OPERATOR.search(window):
        return None
    cursor = tree.walk()
    while True:
        node = cursor.node
        assert node is not None
        if node.type == "identifier" and window[node.start_byte : node.end_byte] in _KEYWORDS:
            word = window[node.start_byte : node.end_byte].decode()
            return node.start_byte, f"unexpected '{word}'"
        if cursor.goto_first_child() or cursor.goto_next_sibling():
            continue
        while cursor.goto_parent():
            if cursor.goto_next_sibling():
                break
        else:
            return None
