"""Python completions cut at a random point (a token budget, a stop string, a cancelled
stream): the shapes tree-sitter-python accepts and Python does not.

Each case is checked against Python's own parser first, so a test cannot pass on a
"broken" text that is in fact valid (or the other way round).
"""

from __future__ import annotations

import ast

import pytest

from synconfroute.server.syntax import check_completion

# A suite three levels deep; the hole is whole lines (the prefix ends at a line start,
# the suffix starts with the next line's indentation).
PRE = "def f(n, g, val):\n    for i in range(n):\n        for j in g[i]:\n            if j:\n"
SUF = "        t &= val[j]\n    return t\n"


def _python_ok(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def verdict(pre: str, completion: str, suf: str) -> str:
    return check_completion(pre, completion, suf, "python").status


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        # a cut in an indentation run: the suffix's first line moves to a column that
        # matches no outer level
        ("                t = 0\n  ", "unindent does not match"),
        ("                t = 0\n      ", "unindent does not match"),
        # ... or deeper, after a line that opens no block
        ("                t = 0\n          ", "unexpected indent"),
        # the last line runs into the suffix's first line
        ("                t = 0\n                break", "two statements on one line"),
        ("                t = 0\n                x", "two statements on one line"),
        # a cut right after "=": `t = t &= val[j]` parses in tree-sitter-python
        ("                t = 0\n            t = ", "assignment of an assignment"),
        ("                t = 0\n            t += ", "assignment of an assignment"),
    ],
)
def test_cut_completions_are_caught(completion: str, why: str) -> None:
    assert not _python_ok(PRE + completion + SUF), why
    assert verdict(PRE, completion, SUF) == "invalid", why


def test_a_shifted_header_that_leaves_its_body_empty_is_caught() -> None:
    pre = "def f(x, v):\n    for i in x:\n        if i:\n            ok = False\n"
    suf = "        if x == 0:\n            v = 1\n    return v\n"
    cut = "            ok = True\n    "  # `if x == 0:` moves into the deeper suite
    assert not _python_ok(pre + cut + suf)
    assert verdict(pre, cut, suf) == "invalid"


@pytest.mark.parametrize(
    "completion",
    [
        "                t = 0\n",  # whole lines
        "                t = 0\n                break\n",
        "                t = 0; ",  # a ";" joins two statements legally
        "                t = 0\n    ",  # the suffix's line moves to a real outer level
        "                t = 0\n            ",  # ... or into the suite above: valid
        "                t = 0",  # glued to the suffix's line: invalid
        "                t = 0\n            u = ",  # `u = t &= val[j]`: invalid
    ],
)
def test_the_gate_agrees_with_python_on_cuts(completion: str) -> None:
    text = PRE + completion + SUF
    expected = "valid" if _python_ok(text) else "invalid"
    assert verdict(PRE, completion, SUF) == expected


def test_chained_assignment_is_valid_python() -> None:
    assert verdict("x = 0\n", "y = ", "x = 1\n") == "valid"  # y = x = 1


def test_the_users_own_glued_or_chained_lines_are_not_blamed() -> None:
    # broken before the completion, away from it: the completion is judged alone
    pre = "def f(a):\n    a = b += 1\n    c = 1\n    "
    assert verdict(pre, "return c", "\n") == "valid"
    pre = "def f(a):\n    x = 1\n    "
    assert verdict(pre, "return x", "\n    break    y = 2\n") == "valid"


@pytest.mark.parametrize(
    ("pre", "completion", "suf"),
    [
        ("def f(s, l, k):\n    ", "s[0], ", "  l += k\n"),  # a tuple augmented
        ("def f(te):\n    ", "del te", "print(te)\n"),  # del of a call
    ],
)
def test_targets_python_refuses(pre: str, completion: str, suf: str) -> None:
    assert not _python_ok(pre + completion + suf)
    assert verdict(pre, completion, suf) == "invalid"
    # the same statements written whole are fine
    assert verdict(pre, completion + "\n    ", suf.lstrip()) == "valid"
