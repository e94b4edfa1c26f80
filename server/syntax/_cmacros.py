"""Statement-like C/C++ macros, which tree-sitter cannot expand.

Competitive and legacy C++ is full of `#define FOR(i,a,b) for(int i=a;i<b;i++)` followed by
`FOR(i,0,n) x+=i;`. tree-sitter sees a call `FOR(i,0,n)` followed by `x+=i` and reports a
missing ';'. When such errors land on a completion we rewrite every invocation of a macro
whose body is a statement head (`for`/`while`/`if`/`switch`...) or a whole statement (ends
in ';' or '}') into a same-length statement that tree-sitter reads alike (`if(0)` plus
spaces, or ';' plus spaces), and ask again. Byte offsets and line breaks are kept, so error
positions stay comparable.
"""

from __future__ import annotations

import re

_DEFINE = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)\r\n]*\))?[ \t]*([^\r\n]*)", re.MULTILINE
)
_CONTROL_HEAD = re.compile(rb"(?:for|while|if|switch|do|else)\b")
_IDENT_HEAD = re.compile(rb"[A-Za-z_]\w*")


def statement_macros(data: bytes) -> dict[bytes, str]:
    """Names of macros defined in `data` that expand to statement syntax.

    Values: "control" (expands to a statement head, needs a statement after it) or
    "statement" (expands to complete statements).
    """
    if b"define" not in data:
        return {}
    bodies: dict[bytes, bytes] = {}
    for m in _DEFINE.finditer(data):
        body = m.group(3).rstrip(b"\\ \t")
        bodies[m.group(1)] = body
    found: dict[bytes, str] = {}
    # Chains like `#define rep(i,n) FOR(i,0,n)`: settle within a few rounds.
    for _ in range(4):
        before = len(found)
        for name, body in bodies.items():
            if name in found:
                continue
            if _CONTROL_HEAD.match(body):
                found[name] = "control"
            elif body.endswith((b";", b"}")):
                found[name] = "statement"
            else:
                head = _IDENT_HEAD.match(body)
                if head and head.group(0) in found:
                    found[name] = found[head.group(0)]
        if len(found) == before:
            break
    return found


def _on_directive_line(data: bytes, pos: int) -> bool:
    line_start = data.rfind(b"\n", 0, pos) + 1
    return data[line_start:pos].lstrip().startswith(b"#")


def _close_paren(data: bytes, open_pos: int) -> int:
    """Index just past the ')' matching data[open_pos] == '(', or -1 if unbalanced."""
    depth = 0
    i = open_pos
    n = len(data)
    while i < n:
        c = data[i]
        if c == 0x28:  # (
            depth += 1
        elif c == 0x29:  # )
            depth -= 1
            if depth == 0:
                return i + 1
        elif c in (0x22, 0x27):  # a string or char literal: skip it
            j = i + 1
            while j < n and data[j] != c and data[j] not in (0x0A,):
                j += 2 if data[j] == 0x5C else 1
            i = j
        elif c == 0x3B and depth == 1:  # ';' at the first level: not an invocation
            return -1
        i += 1
    return -1


def neutralize(data: bytes, macros: dict[bytes, str]) -> bytes:
    """`data` with each invocation of `macros` replaced by an equivalent same-length statement."""
    if not macros:
        return data
    names = b"|".join(re.escape(n) for n in sorted(macros, key=len, reverse=True))
    pattern = re.compile(rb"(?<![\w])(?:" + names + rb")(?![\w])")
    out = bytearray(data)
    for m in pattern.finditer(data):
        if _on_directive_line(data, m.start()):
            continue
        j = m.end()
        while j < len(data) and data[j] in b" \t":
            j += 1
        if j < len(data) and data[j] == 0x28:
            end = _close_paren(data, j)
            if end < 0:
                continue  # an unfinished invocation: let tree-sitter report it
        else:
            end = m.end()
        span = out[m.start() : end]
        blank = bytes(b if b in (0x0A, 0x0D) else 0x20 for b in span)
        if macros[m.group(0)] == "control" and len(span) >= 5 and b"\n" not in span[:5]:
            head = b"if(0)"
        else:
            head = b";"
        out[m.start() : end] = head + blank[len(head) :]
    return bytes(out)
