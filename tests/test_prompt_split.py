"""A tier's budget split between other files' code, recent edits and the current file's
window; ranking and packing that find the callee; the same context for consecutive
keystrokes (issue 21)."""

from __future__ import annotations

from pathlib import Path

from synconfroute.server.workspace import crossfile, prompt_split
from synconfroute.server.workspace.crossfile import Candidate
from synconfroute.server.workspace.recent_edits import EditChunk
from synconfroute.server.workspace.workspace_index import WorkspaceIndex

W = "/w"


def test_a_parenthesised_import_over_several_lines_yields_its_names() -> None:
    # Seen on click: `from .utils import (\n    echo,\n    ...)`: the names on the
    # following lines were missed, so the callee got no import boost.
    text = "from .utils import (\n    echo,  # print\n    make_str as ms,\n)\nfrom x import y\n"
    names, ends = crossfile.imports("python", text, f"{W}/pkg/core.py")
    assert names == {"echo", "make_str", "y"}
    assert f"{W}/pkg/utils.py" in ends


def test_signatures_are_one_line_headers() -> None:
    py = "@cached\ndef fetch(url: str,\n          timeout: float = 1.0) -> bytes:\n    '''Get.'''\n"
    assert (
        crossfile.signature(py, "a.py") == "def fetch(url: str, timeout: float = 1.0) -> bytes: ..."
    )
    assert crossfile.signature("class Box(Base):\n    x = 1\n", "a.py") == "class Box(Base): ..."
    java = (
        "@Override\npublic <T> T fromJson(String json, Class<T> c)\n    throws E {\n  return x;\n}"
    )
    assert (
        crossfile.signature(java, "G.java")
        == "public <T> T fromJson(String json, Class<T> c) throws E;"
    )
    assert crossfile.signature("MAX = 3\n", "a.py") == "MAX = 3"


def _defs(n: int, body_lines: int = 12) -> list[Candidate]:
    out = []
    for i in range(n):
        body = f"def f{i}(a, b):\n" + "".join(f"    x{j} = a + b\n" for j in range(body_lines))
        out.append(
            Candidate(f"{W}/m{i % 3}.py", body, "definition", 1.0 - i / 100, f"f{i}", i * 20)
        )
    return out


def test_mixed_packing_fits_every_signature_then_bodies_best_first() -> None:
    ranked = _defs(20)
    budget = 1200  # room for five bodies, or twenty signatures
    bodies = crossfile.fit(ranked, budget, lambda p: True, pack="bodies")
    mixed = crossfile.fit(ranked, budget, lambda p: True)
    text_b, text_m = "".join(f.text for f in bodies), "".join(f.text for f in mixed)
    assert sum(f"def f{i}(" in text_b for i in range(20)) <= 5  # bodies: a quarter
    assert all(
        f"def f{i}(a, b): ..." in text_m or f"def f{i}(a, b):\n" in text_m for i in range(20)
    )
    assert "def f0(a, b):\n    x0 = a + b" in text_m  # the best one whole
    cost = sum(len(f.text) + crossfile.HEADER_CHARS + len(f.path) for f in mixed)
    assert cost <= budget


def test_the_split_gives_context_its_share_and_cuts_the_window_at_its_far_ends() -> None:
    prefix = "".join(f"far_{i} = {i}\n" for i in range(2000)) + "near = "
    suffix = "\n" + "".join(f"after_{i} = {i}\n" for i in range(2000))
    chunk = EditChunk(f"{W}/e.py", 0, "EDITED = 1", 0.0)
    parts = prompt_split.assemble(
        prefix=prefix,
        suffix=suffix,
        ranked=_defs(20),
        chunks=[chunk],
        total_chars=10000,
        context_tokens=512,
        allowed=lambda p: True,
    )
    s = prompt_split.split(10000, 512, has_edits=True)
    assert (s.context, s.edits) == (1024, 512)
    assert parts.edits and "EDITED = 1" in parts.edits[0].text
    extra = sum(len(f.text) + crossfile.HEADER_CHARS + len(f.path) for f in parts.files)
    assert 1000 < extra <= 1536
    assert len(parts.prefix) + len(parts.suffix) <= 10000 - extra
    assert parts.prefix.endswith("far_1999 = 1999\nnear = ")  # kept near the cursor
    assert parts.suffix.startswith("\nafter_0 = 0\n")
    assert "far_0 = 0\n" not in parts.prefix  # cut at the far end
    # Nothing to add: the window has the whole budget.
    bare = prompt_split.assemble(
        prefix=prefix, suffix=suffix, ranked=[], chunks=[], total_chars=10000,
        context_tokens=512, allowed=lambda p: True,
    )  # fmt: skip
    assert len(bare.prefix) + len(bare.suffix) > 9900 and bare.files == ()


def test_a_private_path_feeds_no_tier_that_refuses_it() -> None:
    ranked = [Candidate(f"{W}/secret.py", "def s():\n  pass\n", "definition", 1.0, "s")]
    chunk = EditChunk(f"{W}/secret.py", 0, "KEY = 1", 0.0)
    parts = prompt_split.assemble(
        prefix="x", suffix="", ranked=ranked, chunks=[chunk], total_chars=5000,
        context_tokens=512, allowed=lambda p: "secret" not in p,
    )  # fmt: skip
    assert parts.files == ()


def test_consecutive_keystrokes_keep_the_same_context_unless_the_ranking_changed() -> None:
    sticky = prompt_split.Sticky()
    ranked = _defs(30)
    first = sticky.choose(("/w/cur.py", "local"), ranked, 900, lambda p: True)
    # Typing moves scores a little and reorders the tail: the same files, byte for byte.
    nudged = [*ranked[:3], *reversed(ranked[3:])]
    again = sticky.choose(("/w/cur.py", "local"), nudged, 900, lambda p: True)
    assert again is first
    # A new best candidate (the user typed a name that is defined elsewhere): new context.
    new_best = Candidate(f"{W}/n.py", "def callee(q):\n    return q\n", "definition", 9.0, "callee")
    changed = sticky.choose(("/w/cur.py", "local"), [new_best, *ranked], 900, lambda p: True)
    assert changed is not first and "def callee(q)" in "".join(f.text for f in changed.files)
    # A privacy change applies at once, whatever was chosen before.
    private = sticky.choose(
        ("/w/cur.py", "local"), [new_best, *ranked], 900, lambda p: not p.endswith("n.py")
    )
    assert all(not f.path.endswith("n.py") for f in private.files)


def test_a_class_named_near_the_cursor_brings_its_methods(tmp_path: Path) -> None:
    # gson: `in.peek()` masked; only `JsonReader in` names the receiver's type.
    reader = (
        "package g;\npublic class JsonReader {\n"
        "  public JsonToken peek() throws IOException {\n    return null;\n  }\n"
        "  public String nextString() {\n    return null;\n  }\n}\n"
    )
    (tmp_path / "JsonReader.java").write_text(reader, encoding="utf-8")
    cur = f"{tmp_path}/Adapter.java"
    index = WorkspaceIndex()
    index.build([str(tmp_path)])
    prefix = "class Adapter {\n  Object read(JsonReader in) {\n    if (in."
    ranked = crossfile.candidates(
        prefix=prefix, suffix="\n  }\n}\n", path=cur, language="java", index=index
    )
    text = "".join(f.text for f in crossfile.fit(ranked, 600, lambda p: True))
    assert "public JsonToken peek() throws IOException" in text
    assert "public String nextString()" in text


def test_where_other_files_code_goes_is_said_in_words_and_on_the_card() -> None:
    from synconfroute.server.settings.config import Settings, with_values
    from synconfroute.server.vocab.card import route_card
    from synconfroute.server.vocab.record import RouteDecision

    s = Settings()
    assert prompt_split.sharing(s) == "local model only (no remote tier)"
    s = with_values(s, {"remote": {"url": "http://gpu:8000/v1", "model": "m"}})
    assert prompt_split.sharing(s) == "local model only (remote.send_context off)"
    s = with_values(s, {"remote": {"send_context": True}})
    assert prompt_split.sharing(s).startswith("local model and the cluster")
    s = with_values(s, {"privacy": {"local_only": True}})
    assert prompt_split.sharing(s) == "local model only (privacy.local_only)"
    s = with_values(s, {"completion": {"context": "file", "recent_edits": False}})
    assert prompt_split.sharing(s).startswith("not used")
    rec = RouteDecision(
        completion="x", route="local", reasons=("confident-and-valid",), policy="synconf",
        confidence=-0.1, threshold=-0.5, syntax=None, local_model="m", remote_model=None,
        context_sharing="local model only (remote.send_context off)",
    )  # fmt: skip
    assert "- other files' code goes to: local model only (remote.send_context off)" in (
        route_card(rec)
    )
