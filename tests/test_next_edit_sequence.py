"""The next-edit sequence over the completion pipeline's steps, against the fake tiers
over real sockets (Ollama's native API, vLLM's OpenAI API), each answering its prompt's
own region rewritten."""

from __future__ import annotations

from pathlib import Path

import attrs

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.next_edit.plan import EditRequest
from synconfroute.server.routing.next_edit.sequence import suggest
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings, with_values
from synconfroute.server.workspace.recent_edits import EditChunk
from tests.fakes import FakeOllama, FakeOpenAI
from tests.fakes.next_edit import RewritingModel

TEXT = (
    "def price(items):\n"
    "    subtotal = 0\n"
    "    for item in items:\n"
    "        total += item.cost\n"
    "    return total\n"
)
RENAMED = TEXT.replace("total +=", "subtotal +=").replace("return total", "return subtotal")


def rename(region: str) -> str:
    return region.replace("total +=", "subtotal +=").replace("return total", "return subtotal")


def broken(region: str) -> str:
    return region.replace("total += item.cost", "total += (item.cost")


def request(tmp_path: Path, name: str = "shop.py") -> EditRequest:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TEXT)
    cursor = TEXT.index("subtotal") + len("subtotal")
    ctx = CompletionContext(
        prefix=TEXT[:cursor], suffix=TEXT[cursor:], language="python", path=str(path),
        roots=(str(tmp_path),),
    )  # fmt: skip
    edit = EditChunk(str(path), 0, TEXT.split("\n", 2)[1], 0.0, "    total = 0")
    import time

    edit = attrs.evolve(edit, first=1, at=time.monotonic())
    return EditRequest(ctx=ctx, text=TEXT, cursor=cursor, recent=(edit,))


def pipeline(local: FakeOllama, remote: FakeOpenAI, settings: Settings | None = None) -> Pipeline:
    s = settings or Settings()
    return Pipeline(
        s,
        OllamaBackend(local.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend(
            [remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None, timeout=5
        ),
        make_gate(s.routing),
    )


def applied(text: str, edit: object) -> str:
    assert edit is not None
    return text[: edit.start] + edit.text + text[edit.end :]  # type: ignore[attr-defined]


async def test_a_confident_valid_local_edit_is_kept(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.answer_for = model = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)
    got = await suggest(p, request(tmp_path), p.rules())
    assert got.decision.route == "local", got.decision
    assert applied(TEXT, got.edit) == RENAMED
    # One range from the first change to the last, the rest of the region untouched.
    assert got.edit is not None and TEXT[got.edit.start : got.edit.end].startswith("total +=")
    assert got.decision.confidence is not None and abs(got.decision.confidence + 0.05) < 1e-9
    assert len(remote_fake.received("/v1/completions")) == 0
    # The prompt: Zeta's, the recent edit as a diff, the cursor marked.
    (prompt,) = model.prompts
    assert "-    total = 0\n+    subtotal = 0" in prompt
    assert "    subtotal<|user_cursor_is_here|> = 0" in prompt


async def test_an_edit_that_breaks_the_file_escalates(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.answer_for = RewritingModel(broken)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)
    got = await suggest(p, request(tmp_path), p.rules())
    assert got.decision.route == "remote", got.decision
    assert "syntax-invalid" in got.decision.reasons
    assert applied(TEXT, got.edit) == RENAMED
    assert got.decision.egress == "passed"


async def test_an_unsure_edit_escalates_on_its_changed_tokens_alone(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    # The copied tokens are sure; the changed ones are not: unsure.
    local_fake.answer_for = RewritingModel(rename, changed_lp=-2.0)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)
    got = await suggest(p, request(tmp_path), p.rules())
    assert got.decision.route == "remote" and "low-confidence" in got.decision.reasons
    assert got.decision.confidence is not None and abs(got.decision.confidence + 2.0) < 1e-9


async def test_a_never_send_files_region_never_leaves(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.answer_for = RewritingModel(broken)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    s = with_values(Settings(), {"privacy": {"never_send": ["secret/**"]}})
    p = pipeline(local_fake, remote_fake, s)
    got = await suggest(p, request(tmp_path, "secret/shop.py"), p.rules())
    assert len(remote_fake.received("/v1/completions")) == 0
    assert got.decision.route == "none" and got.edit is None  # broken: not shown either
    assert "privacy-blocked" in got.decision.reasons


async def test_an_answer_that_rewrites_nothing_is_no_edit(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.answer_for = RewritingModel(lambda r: r)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)
    got = await suggest(p, request(tmp_path), p.rules())
    # Sure that nothing needs changing: no edit, and the cluster is not asked (most
    # requests, one per pause of the cursor, have no next edit).
    assert got.edit is None and got.decision.route == "none"
    assert got.decision.reasons == ("no-edit",)
    assert len(remote_fake.received("/v1/completions")) == 0


async def test_an_unsure_unchanged_region_escalates(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    unsure = RewritingModel(lambda r: r, copied_lp=-2.0)
    local_fake.answer_for = unsure  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)
    got = await suggest(p, request(tmp_path), p.rules())
    assert got.decision.route == "remote" and "empty-local" in got.decision.reasons
    assert applied(TEXT, got.edit) == RENAMED
    assert len(unsure.prompts) == 1  # the local tier asked once, not again by the sequence


async def test_a_rewrite_has_its_own_time_limit_not_a_completions(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    # A rewrite takes longer than a completion: local.total_ms (a completion's limit)
    # must not cut it; next_edit.local_ms is its own.
    local_fake.answer_for = RewritingModel(rename, delay=0.01)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    s = with_values(Settings(), {"local": {"total_ms": 200.0}, "next_edit": {"local_ms": 20_000.0}})
    p = pipeline(local_fake, remote_fake, s)
    got = await suggest(p, request(tmp_path), p.rules())
    assert got.decision.route == "local", got.decision
    assert (got.decision.latency_ms["local_total"]) > 200, got.decision.latency_ms
    assert len(remote_fake.received("/v1/completions")) == 0


async def test_the_gate_judges_what_the_edit_adds_not_the_rest_of_the_file(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    # An unrelated syntax error further down does not reject a valid edit...
    local_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)
    req = request(tmp_path)
    tail = "\n" * 3 + "x = 1\n" * 20 + "def broken(:\n    pass\n"
    req = attrs.evolve(
        req, text=TEXT + tail, ctx=attrs.evolve(req.ctx, suffix=req.ctx.suffix + tail)
    )
    got = await suggest(p, req, p.rules())
    assert got.decision.route == "local", got.decision
    # ...while an edit that uses a name defined nowhere escalates (Python).
    local_fake.answer_for = RewritingModel(  # type: ignore[attr-defined]
        lambda r: rename(r).replace("item.cost", "itemz.cost")
    )
    got = await suggest(p, request(tmp_path), p.rules())
    assert got.decision.route == "remote" and "undefined-name" in got.decision.reasons, got.decision
    assert applied(TEXT, got.edit) == RENAMED
