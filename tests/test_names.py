"""The names gate: a syntax-valid completion that uses a name defined nowhere escalates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.evaluation import report, scoring
from synconfroute.server.evaluation.datasets import Task
from synconfroute.server.evaluation.execute import ExecResult, exec_key
from synconfroute.server.evaluation.records import Generation, Record, RunFolder
from synconfroute.server.routing import router
from synconfroute.server.routing.gate import Anchor, make_gate
from synconfroute.server.routing.pipeline import CompletionContext, Pipeline
from synconfroute.server.routing.router import LocalEvidence, Reason, Rules
from synconfroute.server.routing.rules import resolve_rules
from synconfroute.server.settings.config import Settings, merge_workspace, with_values
from synconfroute.server.syntax import SyntaxDocument, check_completion
from synconfroute.server.syntax.languages import parser_for
from synconfroute.server.syntax.names import undefined_names
from synconfroute.server.vocab.card import route_card
from synconfroute.server.vocab.verdict import Verdict
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing


def names(prefix: str, completion: str, suffix: str = "\n") -> list[str]:
    data = (prefix + completion + suffix).encode()
    lo = len(prefix.encode())
    hi = lo + len(completion.encode())
    tree = parser_for("python").parse(data)
    return [u.name for u in undefined_names("python", tree, data, lo, hi)]


FN = "def f(items, n):\n    "


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("return helper(items)", ["helper"]),  # a guessed helper
        ("return items[n] + count", ["count"]),
        ("return len(items) + n", []),  # parameters and builtins
        ("total = 0\n    return total", []),  # bound by the completion
        ("for i, (a, b) in enumerate(items):\n        print(i, a, b)", []),
        ("return [x * 2 for x in items if x]", []),  # comprehension variable
        ("return {k: v for k, v in items}", []),
        ("return [z for y in items for z in y]", []),
        ("if (m := len(items)) > n:\n        return m", []),  # walrus
        ("with open(n) as fh:\n        return fh.read()", []),
        ("try:\n        pass\n    except ValueError as err:\n        raise err", []),
        ("return lambda q: q + n", []),
        ("import os.path as osp\n    return osp.sep", []),
        ("return items.undefined_attribute.other", []),  # attributes are not looked up
        ("return sorted(items, key=keyfunc)", ["keyfunc"]),  # keyword name skipped, value not
        ("return sorted(items, reverse=True)", []),
        ("return f'{n!r:>{width}}'", ["width"]),  # f-string, nested format spec
        ("return f'{items.count} {n}'", []),
        ("match n:\n        case [a, b]:\n            return a", []),
        ("global G\n    G = 1", []),
        ("return n + n + zz + zz", ["zz"]),  # reported once
        ("x: Unknown = 1", []),  # a local annotation is never evaluated
        ("raise NotImplementedError", []),
        ("return __name__", []),
    ],
)
def test_names_in_a_function(completion: str, expected: list[str]) -> None:
    assert names(FN, completion) == expected


def test_defined_anywhere_else_in_the_file_counts() -> None:
    # a definition after the cursor, a use elsewhere, even a comment: not the model's invention
    assert names(FN, "return later(n)", "\n\ndef later(x):\n    return x\n") == []
    assert names("# see tally\n" + FN, "return tally") == []
    # a second use inside the completion defines nothing
    assert names(FN, "return ghost + ghost") == ["ghost"]
    # an attribute of the same name elsewhere is not a definition
    assert names("obj.ghost = 1\n" + FN, "return ghost") == ["ghost"]


def test_class_bodies() -> None:
    pre = "class Shape:\n    sides = 4\n\n    def area(self):\n        "
    assert names(pre, "return self.sides * unit") == ["unit"]
    assert names(pre, "return sides") == []  # a word of the file: conservative
    assert names("class C:\n    ", "x: Missing = 1") == ["Missing"]  # evaluated in a class
    assert names("class K(", "Base", "):\n    pass\n") == ["Base"]


def test_annotations_under_future_import_are_not_looked_up() -> None:
    assert names(FN, "def g(a) -> Result: pass") == ["Result"]
    lazy = "from __future__ import annotations\n" + FN
    assert names(lazy, "def g(a) -> Result: pass") == []


def test_star_import_turns_the_check_off() -> None:
    assert names("from helpers import *\n" + FN, "return helper(items)") == []
    assert names(FN, "from helpers import *\n    return helper(items)") == []
    assert names("from helpers import (\n    *\n)\n" + FN, "return helper(items)") == []
    assert names("import star\n" + FN, "return helper(items)") == ["helper"]


def test_partial_identifiers_at_the_edges() -> None:
    # The user typed "pri", the completion finishes the word: the whole word counts.
    assert names(FN + "return pri", "nt(items)") == []
    assert names(FN + "return resu", "lt", "\n\nresult = 1\n") == []
    assert names(FN + "return le", "ngth") == ["length"]
    # The completion starts a word the suffix finishes: "ite" + "ms" is the parameter.
    assert names(FN + "return ", "ite", "ms\n") == []


def test_next_to_a_syntax_error_it_passes() -> None:
    # under an ERROR node, roles are guesses: no verdict
    assert names("def f(a):\n    x = g(", "ghost", ", ]\n") == []
    assert names("def f(a):\n    x = g(", "ghost + a", ", ]\n") == []
    # error recovery may swallow the next statements too
    assert names("def f(a):\n    x = (a, ]\n    y = ", "ghost") == []
    # a clean function after the broken one is judged
    assert names("def f(a):\n    x = (a, ]\n\ndef g():\n    return ", "ghost") == ["ghost"]


def test_java_has_no_check() -> None:
    # (C and C++ have their own, by scope: tests/test_names_cpp.py)
    data = b"class A { int f() { return ghost; } }\n"
    tree = parser_for("java").parse(data)
    assert undefined_names("java", tree, data, 27, 32) == []


# ----------------------------------------------------------------- the gate


def test_document_check_reports_names_on_a_valid_verdict() -> None:
    pre = "import math\n\n" + FN
    doc = SyntaxDocument(pre + "\n", "python")
    v = doc.check("return math.floor(helper(n))", len(pre.encode()), names=True)
    assert v.status == "valid" and v.undefined == ("helper",)
    assert (v.line, v.column) == (3, 22)  # the name, in the completed text
    assert "helper" in v.message
    # off by default, and the document is unchanged
    assert doc.check("return helper(n)", len(pre.encode())).undefined == ()
    assert doc.text == pre + "\n"
    # an invalid completion is about syntax only
    bad = doc.check("return helper(n", len(pre.encode()), names=True)
    assert bad.status == "invalid" and bad.undefined == ()


@pytest.mark.parametrize("mode", ["compiler", "confirm"])
def test_names_after_a_compiler_verdict(mode: str) -> None:
    v = check_completion(FN, "return helper(n)", "\n", "python", mode=mode, names=True)  # type: ignore[arg-type]
    assert v.status == "valid" and v.undefined == ("helper",)


def test_names_follow_the_incremental_tree() -> None:
    doc = SyntaxDocument(FN + "\n", "python")
    at = len(FN.encode())
    assert doc.check("return helper(n)", at, names=True).undefined == ("helper",)
    doc.edit_bytes(0, 0, "from tools import helper\n")  # the user imports it
    assert doc.check("return helper(n)", at + 25, names=True).undefined == ()


def test_out_of_budget_the_names_check_passes() -> None:
    doc = SyntaxDocument(FN + "\n", "python")
    v = doc.check("return helper(n)", len(FN.encode()), names=True, budget_s=1e-9)
    assert v.undefined == ()


# ----------------------------------------------------------------- the router


def _rules(**kw: Any) -> Rules:
    """The server's rules at the default settings (`resolve_rules`), `kw` changed; the
    names gate off unless asked."""
    return attrs.evolve(resolve_rules(Settings(), ""), **{"semantic": "off", **kw})


def _ev(**kw: object) -> LocalEvidence:
    base: dict[str, object] = {"text": " helper(n)", "logprobs": (-0.01,) * 3, "syntax": "valid"}
    base.update(kw)
    return LocalEvidence(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["synconf", "syntax"])
def test_undefined_name_escalates_where_the_gate_decides(policy: str) -> None:
    rules = _rules(policy=policy, semantic="names")  # type: ignore[arg-type]
    v = router.decide(_ev(undefined=("helper",)), rules, "ok")
    assert v.action == "escalate" and v.reasons == (Reason.UNDEFINED_NAME,)


@pytest.mark.parametrize("policy", ["confidence", "local"])
def test_policies_without_the_gate_ignore_names(policy: str) -> None:
    rules = _rules(policy=policy, semantic="names")  # type: ignore[arg-type]
    v = router.decide(_ev(undefined=("helper",)), rules, "ok")
    assert v.action == "keep-local"


def test_semantic_off_ignores_names() -> None:
    v = router.decide(_ev(undefined=("helper",)), _rules(semantic="off"), "ok")
    assert v.action == "keep-local" and v.reasons == (Reason.CONFIDENT_AND_VALID,)


def test_undefined_name_with_escalation_blocked_or_failed_keeps_local() -> None:
    ev = _ev(undefined=("helper",))
    rules = _rules(semantic="names")
    v = router.decide(ev, rules, "privacy-blocked")
    assert v.action == "keep-local"
    assert v.reasons[0] == Reason.UNDEFINED_NAME and v.reasons[-1] == Reason.KEPT_LOCAL_UNCONFIRMED
    esc = router.decide(ev, rules, "ok")
    final = router.after_remote(esc, ev, remote_ok=False, remote_text="")
    assert final.route == "local" and Reason.REMOTE_FAILED_KEPT_LOCAL in final.reasons


def test_a_workspace_cannot_turn_the_names_gate_on() -> None:
    user = with_values(Settings(), {"routing": {"semantic": "off"}})
    merged, issues = merge_workspace(user, {"routing": {"semantic": "names"}})
    assert merged.routing.semantic == "off"
    assert [i.key for i in issues] == ["routing.semantic"]
    merged, issues = merge_workspace(Settings(), {"routing": {"semantic": "off"}})
    assert merged.routing.semantic == "off" and issues == []


# ----------------------------------------------------------------- the pipeline


def _pipeline(local: FakeOllama, remote: FakeOpenAI, settings: Settings) -> Pipeline:
    return Pipeline(
        settings,
        OllamaBackend(local.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend(
            [remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None, timeout=5
        ),
        make_gate(settings.routing),
    )


PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\n\nprint(add(1, 2))\n"
GUESSED = TokenScript.of(" a", " +", " offset", logprob=-0.05)


@pytest.mark.parametrize("anchored", [False, True])
async def test_pipeline_escalates_an_undefined_name(
    local_fake: FakeOllama, remote_fake: FakeOpenAI, anchored: bool
) -> None:
    doc = SyntaxDocument(PREFIX + SUFFIX, "python")
    ctx = CompletionContext(
        prefix=PREFIX,
        suffix=SUFFIX,
        language="python",
        path=existing("/repo/calc.py"),
        document=Anchor(doc, doc.position(len(PREFIX))) if anchored else None,
    )
    local_fake.script(GUESSED)
    remote_fake.script(TokenScript.of(" a", " + b", logprob=-0.01))
    rec = await _pipeline(local_fake, remote_fake, Settings()).complete(ctx)
    assert rec.route == "remote" and rec.reasons == ("undefined-name", "remote-ok")
    assert rec.completion == " a + b" and rec.local_completion == " a + offset"
    assert rec.syntax is not None and rec.syntax.status == "valid"
    assert rec.syntax.undefined == ("offset",)
    assert rec.to_json()["syntax"]["undefined"] == ("offset",)
    card = route_card(rec)
    assert "`undefined-name`" in card and "`offset` defined nowhere in the file" in card


async def test_pipeline_with_semantic_off_keeps_local(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    settings = with_values(Settings(), {"routing": {"semantic": "off"}})
    local_fake.script(GUESSED)
    ctx = CompletionContext(prefix=PREFIX, suffix=SUFFIX, language="python")
    rec = await _pipeline(local_fake, remote_fake, settings).complete(ctx)
    assert rec.route == "local" and rec.reasons == ("confident-and-valid",)
    assert rec.syntax is not None and rec.syntax.undefined == ()
    assert len(remote_fake.received("/v1/completions")) == 0


# ----------------------------------------------------------------- the evaluation


def test_scoring_replays_synconf_with_and_without_names(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    # (local text, local passes): both confident and syntax-valid
    for name, text, ok in (("A", "a + b", True), ("B", "a + offset", False)):
        task = Task(
            dataset="hand",
            task_id=name,
            language="python",
            prefix="def add(a, b):\n    return ",
            suffix="\n",
        )
        local = Generation(
            backend="embedded", model="m", raw=text, text=text, tokens=(("t", -0.1),) * 3
        )
        rem = Generation(backend="oracle", model="t", raw="a + b", text="a + b", oracle=True)
        gate = {"tree-sitter": Verdict(valid=True, status="valid", mode="tree-sitter")}
        folder.add_record(Record(task=task, local=local, remote=rem, gate=gate))
        for t, passed in ((text, ok), ("a + b", True)):
            folder.add_exec(exec_key(task, t), task.key, ExecResult(passed=passed, outcome="x"))
    folder.write_info({"remote": "oracle", "local_model": "m"})
    folder.close()
    tasks, _ = scoring.outcomes(
        RunFolder(tmp_path), rules=resolve_rules(Settings(), ""), gate_mode="tree-sitter"
    )
    assert [o.evidence.undefined for o in sorted(tasks, key=lambda o: o.key)] == [(), ("offset",)]
    s = scoring.summarize(tasks, rules=resolve_rules(Settings(), ""))
    plain, named = s["policies"]["synconf"], s["policies"]["synconf+names"]
    assert (plain["escalated"], plain["kept_local_precision"]) == (0, 0.5)
    assert (named["escalated"], named["kept_local_precision"]) == (1, 1.0)
    assert s["gate"]["names_false_rejects"] == 0 and s["gate"]["wrong_undefined"] == 1
    assert "synconf+names" in s["curves"]
    text = report.markdown(
        {
            **s,
            "groups": {"hand/python": s},
            "threshold": -0.5,
            "k": 3,
            "gate_mode": "tree-sitter",
            "remote": "oracle",
        }
    )
    assert "SynConfRoute + names" in text and "1 of 1 wrong ones use a name" in text
