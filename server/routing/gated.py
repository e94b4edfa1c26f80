"""The remote tier behind the egress gate: the only way a remote backend is held.

As httpx wraps a transport, `GatedRemote` wraps a remote backend: every request passes
the gate with its prompt plan before the backend sees it, under the settings of that
moment. A backend whose send path can check the final body (`set_egress`, the OpenAI
client) gets the same gate there too, so the check also holds after a failover wait.
`make_remote` builds remotes only through it and the pipeline wraps whatever remote it
is given, so a backend written tomorrow cannot forget the gate: it never needs to know.

Without settings (a remote built for doctor's probe or a benchmark, before any
pipeline holds it), only text from no workspace file may pass (`dataset_plan`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from synconfroute.clients.errors import EgressRefused
from synconfroute.clients.plan import PromptPlan
from synconfroute.clients.types import Backend, Chunk, Completion, CompletionRequest, ProbeReport

from ..settings.config import Settings
from ..workspace import egress
from .planner import TierRequest

log = logging.getLogger(__name__)

NO_SETTINGS = "no-pipeline"


def refuse_workspace_code(body: bytes, plan: PromptPlan | None) -> None:
    """The send-path check of a remote no pipeline holds: benchmark text only."""
    why = _dataset_only(plan)
    if why is not None:
        raise EgressRefused(
            "not sent: this remote client has no privacy settings to judge workspace code by",
            backend="openai",
            reason=why,
        )


def _dataset_only(plan: PromptPlan | None) -> str | None:
    if plan is None or not plan.sources or any(s.role != "dataset" for s in plan.sources):
        return NO_SETTINGS
    return None


class GatedRemote:
    """A remote backend that sends nothing the egress gate refuses (a `Backend` itself)."""

    def __init__(self, inner: Backend, settings: Callable[[], Settings] | None = None) -> None:
        # One gate, never two: a gated remote re-gated (a pipeline taking a built
        # remote) gets the new settings on the same backend.
        self.inner: Backend = inner.inner if isinstance(inner, GatedRemote) else inner
        self._settings = settings
        self.gate = egress.EgressGate(settings) if settings is not None else None
        install = getattr(self.inner, "set_egress", None)
        if install is not None:
            install(self.gate if self.gate is not None else refuse_workspace_code)
        self.checked = 0
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        # What the backend shows of itself (urls, rates, payload for doctor); its
        # sending methods are this class's own, below.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"GatedRemote({self.inner!r})"

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    def verdict(self, plan: PromptPlan | None) -> str | None:
        """Why a request with `plan` may not leave now (None: it may)."""
        if self._settings is None:
            return _dataset_only(plan)
        return egress.refusal(plan, self._settings())

    def passes(self, plan: PromptPlan | None) -> None:
        """The gate: raises EgressRefused, with the reason, for a plan it refuses."""
        self.checked += 1
        why = self.verdict(plan)
        if why is not None:
            self.refused += 1
            log.info("egress gate: refused a remote request: %s", why)
            raise EgressRefused(
                f"not sent: a source of the prompt is private ({why})",
                backend=self.inner.name,
                reason=why,
            )

    async def send(self, treq: TierRequest) -> Completion:
        """The remote's answer to one planned tier request, once the gate passed it."""
        self.passes(treq.plan)
        return await self.inner.complete(treq.request)

    async def complete(self, request: CompletionRequest) -> Completion:
        self.passes(request.plan)
        return await self.inner.complete(request)

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        self.passes(request.plan)
        async for chunk in self.inner.stream(request):
            yield chunk

    async def discover(self) -> ProbeReport:
        return await self.inner.discover()  # no code: a model list and a probe of its own

    async def aclose(self) -> None:
        await self.inner.aclose()


def gated(remote: Backend | None, settings: Callable[[], Settings] | None) -> GatedRemote | None:
    """`remote` behind the egress gate judging by `settings` (None: no remote tier)."""
    return None if remote is None else GatedRemote(remote, settings)


__all__ = ["NO_SETTINGS", "GatedRemote", "gated", "refuse_workspace_code"]
