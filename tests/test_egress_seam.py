"""The egress gate in the backend seam (issue 35): a remote backend is held only behind
the gate, so one written tomorrow, by someone who never heard of the gate (no
`set_egress`, handed straight to a pipeline), still sends nothing the gate refuses; the
gate's verdict is in the decision record.

On 8c2c157 both tests fail: the pipeline installed its gate with
`getattr(remote, "set_egress", None)`, so such a backend had no gate at all and posted
the gitignored file's code (and a request with no plan) to the cluster.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import httpx
import pytest

from synconfroute.clients.errors import EgressRefused
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.types import Chunk, Completion, CompletionRequest, ProbeReport
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript

INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)  # confident, broken: escalates
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)


class TomorrowBackend:
    """A remote backend as someone might write it tomorrow: it posts the prompt to an
    OpenAI-compatible server with httpx and knows nothing of prompt plans or gates."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self._url = fake.base_url.rstrip("/") + "/completions"
        self._model = fake.models[0]
        self._client = httpx.AsyncClient(timeout=5)

    @property
    def name(self) -> str:
        return "tomorrow"

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: CompletionRequest) -> Completion:
        body = {"model": self._model, "prompt": request.prefix, "max_tokens": 8, "stream": False}
        r = await self._client.post(self._url, json=body)
        choice = r.json()["choices"][0]
        return Completion(
            text=choice["text"],
            tokens=(),
            logprobs=False,
            finish_reason=choice.get("finish_reason"),
            backend=self.name,
            model=self.model,
            first_token_s=None,
            total_s=0.0,
            bytes_sent=len(r.request.content),
        )

    async def stream(self, request: CompletionRequest):  # type: ignore[no-untyped-def]
        done = await self.complete(request)
        yield Chunk(text=done.text, tokens=(), logprobs=False, finish_reason="stop")

    async def discover(self) -> ProbeReport:  # pragma: no cover - not asked here
        raise NotImplementedError

    async def aclose(self) -> None:
        await self._client.aclose()


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    app = ws / "app.py"
    app.write_text("def add(a, b):\n    return \n", encoding="utf-8")
    return ws, app


def _ctx(ws: Path, app: Path) -> CompletionContext:
    return CompletionContext(
        prefix="def add(a, b):\n    return ",
        suffix="\n",
        language="python",
        path=str(app),
        roots=(str(ws),),
    )


def _pipeline(local_fake: FakeOllama, remote: TomorrowBackend) -> Pipeline:
    s = Settings()
    local = OllamaBackend(local_fake.url, "qwen2.5-coder:3b", timeout=5)
    return Pipeline(s, local, remote, make_gate(s.routing))  # handed in raw: the wrong way


async def test_a_backend_without_a_gate_of_its_own_still_sends_nothing_private(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    ws, app = _workspace(tmp_path)
    local_fake.script(INVALID, always=True)
    remote_fake.script(REMOTE, always=True)

    # Control: a public file goes out through the same backend, and the record says so.
    tomorrow = TomorrowBackend(remote_fake)
    rec = await _pipeline(local_fake, tomorrow).complete(_ctx(ws, app))
    assert rec.route == "remote" and len(remote_fake.received("/v1/completions")) == 1
    assert rec.egress == "passed"

    # The file becomes gitignored while the request waits for typing to settle: after
    # the pipeline's early privacy question, before the remote request is planned.
    async def settle() -> bool:
        (ws / ".gitignore").write_text("app.py\n", encoding="utf-8")
        return True

    ctx = attrs.evolve(_ctx(ws, app), settled=settle())
    rec = await _pipeline(local_fake, TomorrowBackend(remote_fake)).complete(ctx)
    assert len(remote_fake.received("/v1/completions")) == 1, "the private code was sent"
    assert rec.route != "remote" and rec.bytes_sent == 0
    assert rec.egress == "refused: gitignored (window)", rec
    await tomorrow.aclose()


async def test_the_pipelines_remote_refuses_a_request_that_says_not_what_it_holds(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    _, app = _workspace(tmp_path)
    remote_fake.script(REMOTE, always=True)
    p = _pipeline(local_fake, TomorrowBackend(remote_fake))
    assert p.remote is not None
    planless = CompletionRequest(prefix="SECRET = 'x'\n", path=str(app))  # no PromptPlan
    with pytest.raises(EgressRefused, match="unresolvable"):
        await p.remote.complete(planless)
    assert remote_fake.received("/v1/completions") == []
    await p.remote.aclose()
