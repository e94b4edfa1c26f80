"""The names gate in C and C++: a name no declaration in scope covers (server/syntax/_cscope).

Each flagged case is also compiled: g++ must reject it for that name, and the passing
completed programs must compile, so the tests say what the compilers say.
"""

from __future__ import annotations

import shutil

import pytest

from synconfroute.server.routing.gate import Anchor
from synconfroute.server.routing.pipeline import CompletionContext
from synconfroute.server.settings.config import Settings
from synconfroute.server.syntax import SyntaxDocument
from synconfroute.server.syntax._compilers import DEFAULT_CONFIG, run_checker
from synconfroute.server.syntax._cxxlibrary import HEADERS, NAMES
from synconfroute.server.vocab.card import route_card
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing
from tests.test_pipeline import pipeline


def undefined(pre: str, completion: str, suf: str, lang: str = "cpp") -> tuple[str, ...]:
    doc = SyntaxDocument(pre + suf, lang)
    v = doc.check(completion, len(pre.encode()), names=True)
    assert v.status == "valid", v
    return v.undefined


def gpp_errors(text: str) -> list[str]:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    res = run_checker("g++", text, None, DEFAULT_CONFIG)
    assert not res.failure and not res.timed_out
    return [d.message for d in res.diagnostics]


# A dropped declaration: the completion's cut lost `ll y = to[i];`, the user's next line
# needs `y`. Another function declares a local `y`.
DIJKSTRA_PRE = """\
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
ll d[100], to[100], nxt[100], head[100];
int count_y(int n) {
    int y = 0;
    for (int i = 0; i < n; i++) y += i;
    return y;
}
int main() {
    int x = 1;
"""
DIJKSTRA_SUF = """\
        d[y] = d[x] + 1;
    }
    return 0;
}
"""


def test_a_dropped_local_declaration_is_flagged() -> None:
    cut = "    for (ll i = head[x]; i; i = nxt[i]) {\n"
    truth = cut + "        ll y = to[i];\n"
    assert undefined(DIJKSTRA_PRE, cut, DIJKSTRA_SUF) == ("y",)
    assert any("'y' was not declared" in m for m in gpp_errors(DIJKSTRA_PRE + cut + DIJKSTRA_SUF))
    assert undefined(DIJKSTRA_PRE, truth, DIJKSTRA_SUF) == ()
    assert gpp_errors(DIJKSTRA_PRE + truth + DIJKSTRA_SUF) == []


def test_a_name_the_completion_invents_is_flagged_and_one_used_elsewhere_is_not() -> None:
    pre = "#include <cstdio>\nint main() {\n    int total = 0;\n"
    suf = "    return 0;\n}\n"
    assert undefined(pre, '    printf("%d", totl);\n', suf) == ("totl",)
    # used in the user's lines too: their code lacks the declaration, not the completion
    assert undefined(pre, '    printf("%d", totl);\n', "    totl++;\n" + suf) == ()
    assert undefined(pre, '    printf("%d", total);\n', suf) == ()


@pytest.mark.parametrize(
    "body",
    [
        "int n = 3, r = n - 1; s += r;",  # an earlier declarator of the same declaration
        "if (int l = s - 1; l > 0) s += l;",  # an if's init statement
        "for (int j = 0; j < 3; j++) s += j;",  # a for's
        "for (auto [a, b] : v) s += a + b;",  # a structured binding
        "auto f = [&, z = 2](int q) { return q + z + s; }; s += f(1);",  # lambda names
        "try { s++; } catch (const exception& e) { s += (int) sizeof(e); }",
        "s += N + g + RED + K;",  # a template parameter, a global, an enumerator, a macro
        "rep(j, 3) s += j;",  # a macro's argument: it declares it
        "cout << left << s << endl;",  # library objects
        "s += __builtin_popcount(s) + INT_MAX;",  # reserved names, macros
    ],
)
def test_names_in_scope_pass(body: str) -> None:
    pre = """\
#include <bits/stdc++.h>
using namespace std;
#define K 3
#define rep(i, n) for (int i = 0; i < (n); i++)
enum { RED };
int g;
int other() { int j = 0, l = 1, a = 2, b = 3, e = 4, z = 5, q = 6, r = 7; return j; }
template <int N> int f(vector<pair<int, int>> v) {
    int s = 0;
"""
    suf = "\n    return s;\n}\nint main() { return f<1>({}); }\n"
    assert undefined(pre, "    " + body, suf) == ()
    assert gpp_errors(pre + "    " + body + suf) == []


def test_members_and_headers_of_its_own_are_not_looked_up() -> None:
    completion = "        total += q;\n"
    # a method: members (maybe a base's, unseen) are in scope
    pre = "#include <vector>\nint other() { int q = 0; return q; }\n"
    pre += "struct S : Base {\n    int total = 0;\n    void add() {\n"
    assert undefined(pre, completion, "    }\n};\n") == ()
    pre2 = "#include <vector>\nint other() { int q = 0; return q; }\nvoid S::add() {\n"
    assert undefined(pre2, completion, "}\n") == ()
    # a header of the project's own (or any other than the standard's) may declare anything
    pre3 = '#include "mine.h"\nint other() { int q = 0; return q; }\nint f() {\n'
    pre3 += "    int total = 0;\n"
    assert undefined(pre3, completion, "    return total;\n}\n") == ()
    assert undefined(pre3.replace('"mine.h"', "<unistd.h>"), completion, "}\n") == ()
    assert undefined(pre3.replace('"mine.h"', "<vector>"), completion, "}\n") == ("q",)


def test_a_line_cut_above_leaves_its_names_alone() -> None:
    # `int t;` cut to `int`: tree-sitter reads on, `int scanf("%d", &t);`, and `t` is
    # declared nowhere. The user's line lost it, not the completion.
    pre = "#include <stdio.h>\nint g() { int t = 0; return t; }\nint main() {\n"
    pre += '    int\n    scanf("%d", &t);\n'
    assert undefined(pre, "    while (t--) {\n", '        puts("x");\n    }\n}\n') == ()


def test_c_files_too() -> None:
    pre = "#include <stdio.h>\nint f(void) { int y = 1; return y; }\nint main(void) {\n"
    pre += "    int x = 0;\n"
    cut = "    for (int i = 0; i < 3; i++) {\n"
    suf = "        x += y;\n    }\n    return x;\n}\n"
    assert undefined(pre, cut, suf, "c") == ("y",)
    assert undefined(pre, cut + "        int y = i;\n", suf, "c") == ()


def test_the_message_says_what_the_compiler_would() -> None:
    cut = "    for (ll i = head[x]; i; i = nxt[i]) {\n"
    doc = SyntaxDocument(DIJKSTRA_PRE + DIJKSTRA_SUF, "cpp")
    v = doc.check(cut, len(DIJKSTRA_PRE.encode()), names=True)
    assert v.valid and v.undefined == ("y",)
    assert v.message == "name 'y' is not declared in scope here"
    assert (v.line, v.column) == (DIJKSTRA_PRE.count("\n") + 1, len("        d["))


def test_java_has_no_names_check() -> None:
    pre = "class A {\n  int f() {\n    return "
    assert undefined(pre, "ghost;", "\n  }\n}\n", "java") == ()


def test_the_library_lists_hold_the_standard_names() -> None:
    # written from the compilers' headers by studies/cxx_library_names.py
    assert {"bits/stdc++.h", "vector", "stdio.h", "cstdio"} <= HEADERS
    assert {"printf", "cout", "endl", "left", "INT_MAX", "y1", "accumulate"} <= NAMES
    # no local-looking name a user declares: literal suffixes (`operator""s`) are not names
    assert not {"i", "j", "x", "s", "d", "y", "ans", "cnt"} & NAMES


# ----------------------------------------------------------------- the pipeline


async def test_pipeline_escalates_a_dropped_declaration(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    # The local model's block stops before `ll y = to[i];`: it parses, and is confident,
    # but the user's next line uses `y`. The route goes remote, and the card says why.
    local_fake.script(
        TokenScript.of("    for (ll i = head[x];", " i; i = nxt[i]) {\n", logprob=-0.05)
    )
    remote_fake.script(
        TokenScript.of(
            "    for (ll i = head[x]; i; i = nxt[i]) {\n", "        ll y = to[i];\n", logprob=-0.01
        )
    )
    doc = SyntaxDocument(DIJKSTRA_PRE + DIJKSTRA_SUF, "cpp")
    ctx = CompletionContext(
        prefix=DIJKSTRA_PRE,
        suffix=DIJKSTRA_SUF,
        language="cpp",
        path=existing("/repo/main.cpp"),
        document=Anchor(doc, doc.position(len(DIJKSTRA_PRE))),
    )
    rec = await pipeline(local_fake.url, remote_fake.base_url, Settings()).complete(ctx)
    assert rec.route == "remote" and rec.reasons == ("undefined-name", "remote-ok")
    assert rec.syntax is not None and rec.syntax.undefined == ("y",)
    assert "ll y = to[i];" in rec.completion
    assert "`y` not declared in scope" in route_card(rec)
